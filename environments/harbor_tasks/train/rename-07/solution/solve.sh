#!/bin/bash
mv /app/parrot.txt /app/paddle.txt
