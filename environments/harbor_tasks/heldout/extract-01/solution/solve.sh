#!/bin/bash
grep '^hassan,' /app/lemon.csv | cut -d, -f3 > /app/answer.txt
