#!/bin/bash
wc -l < /app/falcon.txt > /app/answer.txt
