#!/bin/bash
sed -i 's/cehrry/cherry/' /app/oyster.sh
