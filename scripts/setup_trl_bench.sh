#!/usr/bin/env bash
# Gives bench/trl_comparison.py TRL's GRPOTrainer (and its experimental AsyncGRPOTrainer) with LoRA, in their
# own environment, CPU only: torch (the CPU build) goes in first so that nothing resolves a CUDA torch, then
# trl, peft (LoRA), aiohttp and requests (the async trainer's rollout worker and vLLM client). A user comparing stacks would install
# TRL apart from atroposlib, so the benchmark runs it from here. Outside the repo, reused by later runs:
#   - ATROPOS_TRL_BENCH_PYTHON set: that Python's trl is used; nothing is installed.
#   - ATROPOS_SKIP_TRL=1: nothing is installed (the benchmark runs our row only, and says why).
#   - otherwise: into ${ATROPOS_TRL_BENCH_VENV:-$HOME/.cache/atroposlib/trl-bench-<version>} (two minutes and
#     ~2 GB the first time).
# A failed install never fails the caller: the reason goes to install-failed.txt in that folder and is printed;
# delete that file to try again.
set -uo pipefail
VERSION=1.16.0          # keep equal to TRL_VERSION in bench/trl_comparison.py
PEFT_VERSION=0.21.2
TORCH_VERSION=2.13.0
source "$(dirname "$0")/lib_cached_venv.sh"
cached_venv_start setup_trl_bench trl ATROPOS_TRL_BENCH_PYTHON ATROPOS_SKIP_TRL "the benchmark's TRL rows"
# the marker's suffix changes when the package set does: an older environment is completed, not reused
cached_venv_begin "${ATROPOS_TRL_BENCH_VENV:-$HOME/.cache/atroposlib/trl-bench-$VERSION}" .atroposlib-trl-bench-ok-2
cached_venv_create 4 "trl==$VERSION" "two minutes"
cached_venv_pip_install "torch==$TORCH_VERSION"
cached_venv_pip_install "trl==$VERSION" "peft==$PEFT_VERSION" aiohttp requests "torch==$TORCH_VERSION"
cached_venv_verify "trl==$VERSION" "$VENV/bin/python" -c \
  "import torch, trl, peft, aiohttp, requests; assert not torch.version.cuda, 'a CUDA torch came in'"
cached_venv_done
