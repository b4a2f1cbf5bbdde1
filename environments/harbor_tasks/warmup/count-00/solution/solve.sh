#!/bin/bash
wc -l < /app/beacon.txt > /app/answer.txt
