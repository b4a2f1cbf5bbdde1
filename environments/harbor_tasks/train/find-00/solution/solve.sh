#!/bin/bash
cd /app/marble && grep -l maple * > /app/answer.txt
