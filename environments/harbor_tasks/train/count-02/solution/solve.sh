#!/bin/bash
wc -l < /app/maple.txt > /app/answer.txt
