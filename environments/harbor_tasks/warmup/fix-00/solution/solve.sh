#!/bin/bash
sed -i 's/ktetle/kettle/' /app/yellow.sh
