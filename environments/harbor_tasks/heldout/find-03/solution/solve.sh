#!/bin/bash
cd /app/monkey && grep -l needle * > /app/answer.txt
