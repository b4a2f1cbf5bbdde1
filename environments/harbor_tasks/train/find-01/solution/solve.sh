#!/bin/bash
cd /app/spider && grep -l paddle * > /app/answer.txt
