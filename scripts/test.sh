#!/usr/bin/env bash
# The README's test command: set up .venv (and vLLM's own environment), then run the whole test suite.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh tests/api -x`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# vLLM's own environment for the real-vLLM tier (tests/real_vllm); never fails, the tier skips instead.
bash scripts/setup_vllm.sh
# SLURM for the launcher's SLURM tier (tests/launch/test_slurm_tier.py); never fails, the tier skips instead.
bash scripts/setup_slurm.sh
# Ray and the project's dependencies in one cached environment for the launcher's Ray tier
# (tests/launch/test_ray_tier.py); never fails, the tier skips instead.
bash scripts/setup_ray.sh
# openenv's own environment for the OpenEnv interop tests (tests/interop); never fails, they skip instead.
bash scripts/setup_openenv.sh
# verifiers (the `verifiers` extra) into .venv for the verifiers interop tests; never fails, they skip instead.
bash scripts/setup_verifiers.sh
# TRL (GRPOTrainer, CPU torch) + openenv's client for the TRL interop test; never fails, it skips instead.
bash scripts/setup_trl.sh
# bubblewrap, podman (a locally built base image) and Harbor in its Python 3.12 environment for the Harbor
# tier (tests/interop/harbor); never fails, what cannot be set up skips with the reason.
bash scripts/setup_harbor.sh
# BFCL's official checker (bfcl-eval, a light install) for the BFCL tests; never fails, they skip instead.
bash scripts/setup_bfcl.sh
# The agent frameworks (openai, openai-agents, smolagents, mini-swe-agent + litellm, langchain-openai,
# hermes-agent), each in its own environment, for the conformance suite (tests/interop/agents,
# tests/real_vllm/test_proxy_agents.py); never fails, each framework's tests skip instead.
bash scripts/setup_agents.sh
# schemathesis in its own environment for the schema-fuzzing tier (tests/fuzz); never fails, it skips instead.
bash scripts/setup_schemathesis.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled \
  GRADIO_ANALYTICS_ENABLED=False TOKENIZERS_PARALLELISM=false
set +e
# --durations: the slowest tests are printed with every run, to keep the suite inside its ~20-minute budget.
# -n: the tests run in ATROPOS_TEST_WORKERS pytest-xdist workers (default 2: much of the suite waits on
# servers and subprocesses); --dist loadgroup keeps each test file, and each folder whose session
# servers are shared (tests/conftest.py's SHARED_FIXTURE_GROUPS), on one worker. ATROPOS_TEST_WORKERS=0
# runs everything in this one process.
.venv/bin/python -m pytest -q -n "${ATROPOS_TEST_WORKERS:-2}" --dist loadgroup --durations=25 "$@"
rc=$?
set -e
# pytest exits 5 when it collected no test: that is a broken suite, not a pass.
if [ "$rc" -eq 5 ]; then echo "test.sh: pytest collected no tests" >&2; exit 1; fi
exit "$rc"
