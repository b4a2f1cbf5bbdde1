#!/bin/bash
mv /app/saddle.txt /app/cloud.txt
