#!/bin/bash
sed -i 's/tomtao/tomato/' /app/ginger.sh
