#!/bin/bash
grep '^oscar,' /app/glacier.csv | cut -d, -f2 > /app/answer.txt
