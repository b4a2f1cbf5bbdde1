#!/usr/bin/env bash
# Creates ./.venv and installs atroposlib with every extra, torch first.
# Idempotent: re-runs only when pyproject.toml changed. Usage: source-free, `bash scripts/setup.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for c in python3.11 python3 python; do command -v "$c" >/dev/null 2>&1 && { PY=$c; break; }; done
fi
[ -n "$PY" ] || { echo "setup: no python3 found" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
stamp=.venv/.atroposlib-installed
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
# torch first, pinned: on a CPU-only machine this resolves to the CPU build, so the extras' `torch>=2.1`
# ranges are already satisfied and pip never pulls the multi-GB CUDA build.
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  echo "setup: installing torch==2.13.0"
  .venv/bin/python -m pip install -q "torch==2.13.0" 2>&1 | grep -v "is ignored" || true
  .venv/bin/python -c "import torch" || { echo "setup: torch install failed" >&2; exit 1; }
fi
echo "setup: installing atroposlib[all] (editable)"
.venv/bin/python -m pip install -q -e ".[all]" 2>&1 | grep -v "is ignored" || true
.venv/bin/python -c "import atroposlib" || { echo "setup: atroposlib install failed" >&2; exit 1; }
echo "$want" > "$stamp"
