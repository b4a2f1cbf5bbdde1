#!/bin/bash
mv /app/ribbon.txt /app/circle.txt
