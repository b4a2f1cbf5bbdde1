#!/bin/bash
wc -l < /app/copper.txt > /app/answer.txt
