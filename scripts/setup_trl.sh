#!/usr/bin/env bash
# Gives the TRL interop test (tests/interop/test_trl_grpo.py) TRL's GRPOTrainer and the real `openenv`
# client in their own environment, CPU only: torch (the CPU build) goes in first so that nothing resolves
# a CUDA torch, then trl and openenv. Outside the repo so that repeated runs on one machine reuse it:
#   - ATROPOS_TRL_PYTHON set: that Python's trl is used; nothing is installed.
#   - ATROPOS_SKIP_TRL=1: nothing is installed (the TRL test skips).
#   - otherwise: into ${ATROPOS_TRL_VENV:-$HOME/.cache/atroposlib/trl-<version>} (two minutes and ~2 GB
#     the first time).
# A failed install never fails the caller: the reason goes to install-failed.txt in that folder, is printed,
# and the test skips with it; delete that file to try again.
set -uo pipefail
VERSION=1.16.0          # keep equal to TRL_VERSION in tests/interop/test_trl_grpo.py
OPENENV_VERSION=0.10.0  # the same openenv as scripts/setup_openenv.sh
TORCH_VERSION=2.13.0
source "$(dirname "$0")/lib_cached_venv.sh"
cached_venv_start setup_trl trl ATROPOS_TRL_PYTHON ATROPOS_SKIP_TRL "the TRL test"
cached_venv_begin "${ATROPOS_TRL_VENV:-$HOME/.cache/atroposlib/trl-$VERSION}" .atroposlib-trl-ok
cached_venv_create 4 "trl==$VERSION" "two minutes"
cached_venv_pip_install "torch==$TORCH_VERSION"
cached_venv_pip_install "trl==$VERSION" "openenv==$OPENENV_VERSION" "torch==$TORCH_VERSION"
cached_venv_verify "trl==$VERSION" "$VENV/bin/python" -c \
  "import torch, trl, openenv.core.generic_client; assert not torch.version.cuda, 'a CUDA torch came in'"
cached_venv_done
