#!/bin/bash
cd /app/jungle && grep -l bridge * > /app/answer.txt
