#!/bin/bash
mv /app/turtle.txt /app/ladder.txt
