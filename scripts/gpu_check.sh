#!/usr/bin/env bash
# The GPU check (bench/gpu_check.py): trainer steps on Qwen2.5-0.5B/1.5B shapes (random weights built on
# the device; chunked and full-vocabulary heads at 4k/16k/32k tokens: tokens/s, MFU, peak memory) and the
# whole loop on one GPU (run-api, our engine on CUDA, the arithmetic env, the trainer reloading weights
# in place), one table and one JSON, in under 10 minutes. Refuses with one line without CUDA.
#
# On a machine without internet that lacks pydantic/fastapi/uvicorn/... (the borrowed GPU machine, see
# docs/training.md) carry the bundle built by scripts/build_gpu_bundle.sh: when gpu-bundle/ (or
# $ATROPOS_GPU_BUNDLE) exists it is installed first, offline, into .gpu-site/ (or $ATROPOS_GPU_SITE) with
# `pip install --no-index --no-deps --target`, only the wheels the machine lacks, and put on PYTHONPATH.
# Usage: bash scripts/gpu_check.sh [--out FILE] [--device cuda|cpu] [--budget-s 540] [...]
#        (bench/gpu_check.py --help lists every option). The JSON goes to $OUT/gpu_check.json when $OUT is set.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
command -v "$PY" >/dev/null 2>&1 || { echo "gpu_check: error: no Python at '$PY' (set PYTHON)" >&2; exit 1; }
BUNDLE="${ATROPOS_GPU_BUNDLE:-gpu-bundle}"
SITE="${ATROPOS_GPU_SITE:-.gpu-site}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled \
  TOKENIZERS_PARALLELISM=false TRANSFORMERS_VERBOSITY=error PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
bundle_line=""
if [ -d "$BUNDLE" ]; then
  # one line on stdout; a failure is one line on stderr and exit 1
  bundle_line=$("$PY" scripts/gpu_bundle.py install --bundle "$BUNDLE" --site "$SITE")
  echo "$bundle_line"
  export PYTHONPATH="$PWD:$(cd "$SITE" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
exec "$PY" bench/gpu_check.py --bundle-line "$bundle_line" "$@"
