#!/bin/bash
sed -i 's/pilow/pillow/' /app/tunnel.sh
