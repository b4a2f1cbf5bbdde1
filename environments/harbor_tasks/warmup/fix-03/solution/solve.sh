#!/bin/bash
sed -i 's/medaow/meadow/' /app/window.sh
