#!/bin/bash
grep '^nadia,' /app/castle.csv | cut -d, -f3 > /app/answer.txt
