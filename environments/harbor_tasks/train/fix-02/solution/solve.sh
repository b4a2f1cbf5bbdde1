#!/bin/bash
sed -i 's/rabit/rabbit/' /app/harbor.sh
