#!/bin/bash
grep '^vera,' /app/cedar.csv | cut -d, -f2 > /app/answer.txt
