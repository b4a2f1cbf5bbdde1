#!/bin/bash
cd /app/lemon && grep -l garden * > /app/answer.txt
