#!/bin/bash
wc -l < /app/planet.txt > /app/answer.txt
