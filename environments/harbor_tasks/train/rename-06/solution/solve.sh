#!/bin/bash
mv /app/basket.txt /app/granite.txt
