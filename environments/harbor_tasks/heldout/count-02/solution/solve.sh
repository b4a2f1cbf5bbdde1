#!/bin/bash
wc -l < /app/marble.txt > /app/answer.txt
