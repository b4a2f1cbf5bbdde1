#!/bin/bash
mv /app/marble.txt /app/spring.txt
