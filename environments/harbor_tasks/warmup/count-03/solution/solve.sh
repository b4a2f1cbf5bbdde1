#!/bin/bash
wc -l < /app/wizard.txt > /app/answer.txt
