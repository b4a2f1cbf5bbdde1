#!/bin/bash
cd /app/wizard && grep -l lantern * > /app/answer.txt
