#!/bin/bash
cd /app/summer && grep -l tunnel * > /app/answer.txt
