#!/bin/bash
grep '^nadia,' /app/rocket.csv | cut -d, -f3 > /app/answer.txt
