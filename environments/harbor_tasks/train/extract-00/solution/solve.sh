#!/bin/bash
grep '^irene,' /app/comet.csv | cut -d, -f2 > /app/answer.txt
