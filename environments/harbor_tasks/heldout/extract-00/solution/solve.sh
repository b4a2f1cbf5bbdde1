#!/bin/bash
grep '^alice,' /app/velvet.csv | cut -d, -f2 > /app/answer.txt
