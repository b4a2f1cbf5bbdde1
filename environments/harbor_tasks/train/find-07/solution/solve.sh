#!/bin/bash
cd /app/anchor && grep -l copper * > /app/answer.txt
