#!/bin/bash
sed -i 's/lantren/lantern/' /app/summer.sh
