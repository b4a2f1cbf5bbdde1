#!/usr/bin/env bash
# The README's main command: set up .venv, then run the CPU end-to-end demo (see README).
# Extra arguments go to the demo (e.g. `bash scripts/demo.sh --control shuffled`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# `--inference vllm` needs vLLM's own environment (made once; see scripts/setup_vllm.sh)
case " $* " in *" --inference vllm "*|*" --inference=vllm "*) bash scripts/setup_vllm.sh ;; esac
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled \
  GRADIO_ANALYTICS_ENABLED=False TOKENIZERS_PARALLELISM=false
exec .venv/bin/python -m example_trainer.demo "$@"
