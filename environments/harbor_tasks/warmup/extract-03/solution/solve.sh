#!/bin/bash
grep '^paula,' /app/timber.csv | cut -d, -f3 > /app/answer.txt
