#!/bin/bash
grep '^irene,' /app/winter.csv | cut -d, -f3 > /app/answer.txt
