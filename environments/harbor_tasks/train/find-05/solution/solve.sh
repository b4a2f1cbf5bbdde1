#!/bin/bash
cd /app/winter && grep -l granite * > /app/answer.txt
