#!/bin/bash
sed -i 's/graden/garden/' /app/hollow.sh
