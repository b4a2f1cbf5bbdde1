#!/bin/bash
mv /app/island.txt /app/jungle.txt
