#!/bin/bash
grep '^bruno,' /app/zipper.csv | cut -d, -f2 > /app/answer.txt
