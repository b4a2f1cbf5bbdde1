#!/bin/bash
cd /app/cherry && grep -l cloud * > /app/answer.txt
