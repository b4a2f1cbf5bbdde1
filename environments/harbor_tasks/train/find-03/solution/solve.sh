#!/bin/bash
cd /app/pocket && grep -l badge * > /app/answer.txt
