#!/bin/bash
wc -l < /app/needle.txt > /app/answer.txt
