#!/bin/bash
mv /app/falcon.txt /app/mirror.txt
