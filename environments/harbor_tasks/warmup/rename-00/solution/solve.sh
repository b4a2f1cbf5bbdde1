#!/bin/bash
mv /app/summer.txt /app/puzzle.txt
