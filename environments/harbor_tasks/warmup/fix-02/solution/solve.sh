#!/bin/bash
sed -i 's/coemt/comet/' /app/pocket.sh
