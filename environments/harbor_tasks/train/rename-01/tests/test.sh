#!/bin/bash
# Harbor verifier of a rename task: reward 1 when the chore is done, else 0.
mkdir -p /logs/verifier
if [ ! -e /app/velvet.txt ] && [ "$(cat /app/yellow.txt 2>/dev/null)" = "paddle 204" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
