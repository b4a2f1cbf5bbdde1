#!/bin/bash
# Harbor verifier of a find task: reward 1 when the chore is done, else 0.
mkdir -p /logs/verifier
if [ "$(basename "$(tr -d "[:space:]" < /app/answer.txt 2>/dev/null)")" = "tomato.txt" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
