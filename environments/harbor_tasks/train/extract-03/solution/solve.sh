#!/bin/bash
grep '^kira,' /app/kettle.csv | cut -d, -f3 > /app/answer.txt
