#!/bin/bash
wc -l < /app/jacket.txt > /app/answer.txt
