#!/bin/bash
# Harbor verifier of a fix task: reward 1 when the chore is done, else 0.
mkdir -p /logs/verifier
if [ "$(timeout 5 bash /app/ginger.sh 2>/dev/null)" = "tomato 14" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
