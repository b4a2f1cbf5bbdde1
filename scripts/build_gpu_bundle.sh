#!/usr/bin/env bash
# Builds the wheel bundle the GPU check needs on the borrowed GPU machine (no internet there; see
# docs/training.md): the pins of scripts/gpu_bundle.txt and what they require, as binary wheels for
# Python 3.12 manylinux x86_64, minus what scripts/gpu_machine.txt says the machine has. Needs PyPI here.
# atroposlib itself is not in it: the check runs from the checkout that travels with the command.
# Usage: bash scripts/build_gpu_bundle.sh [--out gpu-bundle] [--python-version 3.12]
# Then carry gpu-bundle/ with the command and run `bash scripts/gpu_check.sh` there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
exec "$PY" scripts/gpu_bundle.py build "$@"
