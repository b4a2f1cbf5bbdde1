#!/bin/bash
mv /app/window.txt /app/nickel.txt
