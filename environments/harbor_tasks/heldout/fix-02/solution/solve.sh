#!/bin/bash
sed -i 's/cahlk/chalk/' /app/glacier.sh
