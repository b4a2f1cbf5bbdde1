#!/usr/bin/env bash
# Gives the BFCL tier (tests/interop/bfcl, environments/bfcl_env.py, the smollm2 bfcl demo preset) the
# official Berkeley Function Calling Leaderboard checker: PyPI `bfcl-eval`, whose wheel ships every test file
# and its AST checker. The light install (46 MB, seconds): `--no-deps bfcl-eval` plus the few packages its
# loader and checker import (the full install pulls 150 packages and a CUDA torch, and then fails on import
# without soundfile); atroposlib stubs the one module it skips (bfcl_eval.constants.model_config) in its worker.
# Outside the repo so that repeated runs on one machine reuse it:
#   - ATROPOS_BFCL_PYTHON set: that Python's bfcl_eval is used; nothing is installed.
#   - ATROPOS_SKIP_BFCL=1: nothing is installed (the BFCL tests skip).
#   - otherwise: into ${ATROPOS_BFCL_VENV:-$HOME/.cache/atroposlib/bfcl-eval-<version>} (under 30 s the first time).
#   - `--official`: the whole package instead, into ~/.cache/atroposlib/bfcl-eval-full-<version>
#     (ATROPOS_BFCL_OFFICIAL_PYTHON / _VENV), for bench/bfcl_crosscheck.py's run of BFCL's own pipeline.
# A failed install never fails the caller: the reason goes to install-failed.txt in that folder, is printed,
# and the tests skip with it; delete that file to try again.
set -uo pipefail
VERSION=2026.3.23   # keep equal to BFCL_EVAL_VERSION in atroposlib/interop/bfcl/locate.py
TORCH_VERSION=2.13.0
source "$(dirname "$0")/lib_cached_venv.sh"
if [ "${1:-}" = "--official" ]; then
  # The whole package, for the official side of bench/bfcl_crosscheck.py (`bfcl generate`, `bfcl evaluate`):
  # the CPU torch first (sentence-transformers would pull a CUDA one), soundfile (qwen-agent imports it
  # undeclared). ~3 GB and a few minutes; nothing in the test suite needs it.
  cached_venv_start setup_bfcl "bfcl-eval (full)" ATROPOS_BFCL_OFFICIAL_PYTHON ATROPOS_SKIP_BFCL \
    "bench/bfcl_crosscheck.py's official side"
  cached_venv_begin "${ATROPOS_BFCL_OFFICIAL_VENV:-$HOME/.cache/atroposlib/bfcl-eval-full-$VERSION}" \
    .atroposlib-bfcl-ok
  cached_venv_create 8 "bfcl-eval==$VERSION (full)" "a few minutes"
  cached_venv_pip_install "torch==$TORCH_VERSION"
  cached_venv_pip_install "bfcl-eval==$VERSION" soundfile "torch==$TORCH_VERSION"
  cached_venv_verify "bfcl-eval==$VERSION" "$VENV/bin/python" -c \
    "import bfcl_eval.constants.model_config, bfcl_eval.__main__"
  cached_venv_done
  exit 0
fi
cached_venv_start setup_bfcl bfcl-eval ATROPOS_BFCL_PYTHON ATROPOS_SKIP_BFCL "the BFCL tests"
cached_venv_begin "${ATROPOS_BFCL_VENV:-$HOME/.cache/atroposlib/bfcl-eval-$VERSION}" .atroposlib-bfcl-ok
cached_venv_create 1 "bfcl-eval==$VERSION (light)" "under a minute"
cached_venv_pip_install --no-deps "bfcl-eval==$VERSION"
cached_venv_pip_install filelock tenacity "tree-sitter==0.21.3" "tree-sitter-java==0.21.0" \
  "tree-sitter-javascript==0.21.4"
cached_venv_verify "bfcl-eval==$VERSION" "$VENV/bin/python" \
  "$(dirname "$0")/../atroposlib/interop/bfcl/worker.py" --self-check
cached_venv_done
