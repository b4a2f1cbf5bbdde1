#!/bin/bash
wc -l < /app/badge.txt > /app/answer.txt
