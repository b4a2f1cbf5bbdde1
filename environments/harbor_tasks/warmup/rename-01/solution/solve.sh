#!/bin/bash
mv /app/bridge.txt /app/monkey.txt
