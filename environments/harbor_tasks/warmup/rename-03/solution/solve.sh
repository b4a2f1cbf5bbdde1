#!/bin/bash
mv /app/pencil.txt /app/jacket.txt
