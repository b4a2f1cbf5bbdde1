#!/bin/bash
mv /app/tunnel.txt /app/cedar.txt
