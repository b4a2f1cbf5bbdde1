#!/bin/bash
wc -l < /app/chalk.txt > /app/answer.txt
