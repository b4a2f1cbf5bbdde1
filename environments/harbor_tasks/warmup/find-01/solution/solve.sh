#!/bin/bash
cd /app/window && grep -l dragon * > /app/answer.txt
