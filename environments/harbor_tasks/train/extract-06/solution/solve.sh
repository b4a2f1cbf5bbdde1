#!/bin/bash
grep '^greta,' /app/feather.csv | cut -d, -f3 > /app/answer.txt
