#!/bin/bash
grep '^tina,' /app/engine.csv | cut -d, -f3 > /app/answer.txt
