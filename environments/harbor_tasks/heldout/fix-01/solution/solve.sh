#!/bin/bash
sed -i 's/parort/parrot/' /app/jungle.sh
