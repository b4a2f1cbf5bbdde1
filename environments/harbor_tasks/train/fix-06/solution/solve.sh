#!/bin/bash
sed -i 's/talbet/tablet/' /app/cotton.sh
