#!/bin/bash
mv /app/fossil.txt /app/lemon.txt
