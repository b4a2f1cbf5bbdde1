#!/bin/bash
wc -l < /app/engine.txt > /app/answer.txt
