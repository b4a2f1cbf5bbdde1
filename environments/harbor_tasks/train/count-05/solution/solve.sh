#!/bin/bash
wc -l < /app/puzzle.txt > /app/answer.txt
