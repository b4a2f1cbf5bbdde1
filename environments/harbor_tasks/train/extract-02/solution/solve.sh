#!/bin/bash
grep '^nadia,' /app/spider.csv | cut -d, -f3 > /app/answer.txt
