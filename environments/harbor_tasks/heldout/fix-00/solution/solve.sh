#!/bin/bash
sed -i 's/mirorr/mirror/' /app/orchid.sh
