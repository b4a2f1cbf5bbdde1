#!/bin/bash
grep '^walter,' /app/cotton.csv | cut -d, -f2 > /app/answer.txt
