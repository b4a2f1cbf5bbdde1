#!/bin/bash
wc -l < /app/pillow.txt > /app/answer.txt
