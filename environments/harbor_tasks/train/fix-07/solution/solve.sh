#!/bin/bash
sed -i 's/csatle/castle/' /app/canyon.sh
