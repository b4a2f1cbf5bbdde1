#!/usr/bin/env bash
# Gives the launcher's Ray tier (tests/launch/test_ray_tier.py and the Ray bad-input tests) one environment
# with Ray and the project's dependencies, as `pip install 'atroposlib[ray]'` would on a cluster: the
# launcher, Ray's workers and every component they start run on the same Python. Outside the repo so that
# repeated runs on one machine reuse it:
#   - ATROPOS_RAY_PYTHON set: that Python (with ray and the project's dependencies) is used; nothing installed.
#   - ATROPOS_SKIP_RAY=1: nothing is installed (the Ray tests skip).
#   - otherwise: torch==2.13.0 first (the CPU build, so nothing pulls CUDA torch), then ray[default]==<version>
#     and the project's dependencies (core, inference, trainer) into
#     ${ATROPOS_RAY_VENV:-$HOME/.cache/atroposlib/ray-<version>} (two or three minutes, ~2.5 GB, the first time).
# A failed install never fails the caller: the reason goes to install-failed.txt in that folder, is printed,
# and the tests skip with it; delete that file to try again.
set -uo pipefail
VERSION=2.60.0   # keep equal to RAY_VERSION in tests/launch/ray_env.py and the `ray` extra in pyproject.toml
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$(dirname "$0")/lib_cached_venv.sh"
cached_venv_start setup_ray "ray[default]" ATROPOS_RAY_PYTHON ATROPOS_SKIP_RAY "the Ray tests"
cached_venv_begin "${ATROPOS_RAY_VENV:-$HOME/.cache/atroposlib/ray-$VERSION}" .atroposlib-ray-ok
cached_venv_create 4 "ray[default]==$VERSION" "two or three minutes"
cached_venv_pip_install "torch==2.13.0"
# the project's own dependencies (not the project: the tests put the checkout on PYTHONPATH)
mapfile -t DEPS < <("$VENV/bin/python" - "$ROOT/pyproject.toml" <<'PY'
import sys, tomllib
p = tomllib.load(open(sys.argv[1], "rb"))["project"]
extras = p["optional-dependencies"]
for d in p["dependencies"] + extras["inference"] + extras["trainer"]:
    print(d)
PY
)
[ "${#DEPS[@]}" -gt 0 ] || cached_venv_fail "could not read the dependencies from $ROOT/pyproject.toml"
if ! "$VENV/bin/python" -m pip install "ray[default]==$VERSION" "torch==2.13.0" "${DEPS[@]}" >>"$CACHED_VENV_LOG" 2>&1; then
  cached_venv_fail "pip install ray[default]==$VERSION failed: $(grep -E '^ERROR' "$CACHED_VENV_LOG" | tail -n 1)"
fi
cached_venv_verify "ray[default]==$VERSION" \
  "$VENV/bin/python" -c "import ray, ray.util.placement_group, torch, transformers, fastapi, uvicorn"
cached_venv_done
