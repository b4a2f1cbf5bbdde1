#!/bin/bash
mv /app/spider.txt /app/river.txt
