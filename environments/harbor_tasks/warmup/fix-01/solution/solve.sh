#!/bin/bash
sed -i 's/trutle/turtle/' /app/teapot.sh
