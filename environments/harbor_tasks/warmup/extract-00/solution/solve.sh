#!/bin/bash
grep '^umar,' /app/jacket.csv | cut -d, -f3 > /app/answer.txt
