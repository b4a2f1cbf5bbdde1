#!/bin/bash
wc -l < /app/window.txt > /app/answer.txt
