#!/bin/bash
cd /app/bottle && grep -l tablet * > /app/answer.txt
