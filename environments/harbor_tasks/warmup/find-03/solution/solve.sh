#!/bin/bash
cd /app/fiddle && grep -l cedar * > /app/answer.txt
