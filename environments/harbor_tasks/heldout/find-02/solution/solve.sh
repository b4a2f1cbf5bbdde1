#!/bin/bash
cd /app/carpet && grep -l orchid * > /app/answer.txt
