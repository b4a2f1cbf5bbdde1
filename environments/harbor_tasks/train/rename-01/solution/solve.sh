#!/bin/bash
mv /app/velvet.txt /app/yellow.txt
