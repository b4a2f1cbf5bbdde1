#!/bin/bash
sed -i 's/canlde/candle/' /app/cloud.sh
