#!/bin/bash
wc -l < /app/meadow.txt > /app/answer.txt
