#!/usr/bin/env bash
# Gives the OpenEnv interop tests (tests/interop) the real `openenv` package, in its own environment:
# openenv's dependencies (fastmcp needs mcp<2) cannot share the project's environment with verifiers', so
# it never goes into the project venv. Outside the repo so that repeated runs on one machine reuse it:
#   - ATROPOS_OPENENV_PYTHON set: that Python's openenv is used; nothing is installed.
#   - ATROPOS_SKIP_OPENENV=1: nothing is installed (the OpenEnv tests skip).
#   - otherwise: openenv==<version> goes into ${ATROPOS_OPENENV_VENV:-$HOME/.cache/atroposlib/openenv-<version>}
#     (a minute or two and ~1 GB the first time).
# A failed install never fails the caller: the reason goes to install-failed.txt in that folder, is printed,
# and the tests skip with it; delete that file to try again.
set -uo pipefail
VERSION=0.10.0   # keep equal to OPENENV_VERSION in tests/interop/conftest.py
if [ -n "${ATROPOS_OPENENV_PYTHON:-}" ]; then
  echo "setup_openenv: using ATROPOS_OPENENV_PYTHON=$ATROPOS_OPENENV_PYTHON"
  exit 0
fi
[ "${ATROPOS_SKIP_OPENENV:-0}" = 1 ] && { echo "setup_openenv: ATROPOS_SKIP_OPENENV=1, not installing openenv"; exit 0; }
VENV=${ATROPOS_OPENENV_VENV:-$HOME/.cache/atroposlib/openenv-$VERSION}
OK=$VENV/.atroposlib-openenv-ok
FAILED=$VENV/install-failed.txt
[ -f "$OK" ] && exit 0
if [ -f "$FAILED" ]; then
  echo "setup_openenv: an earlier install failed ($(tail -n 1 "$FAILED")); delete $FAILED to retry" >&2
  exit 0
fi
fail() {
  mkdir -p "$VENV"
  echo "$1" > "$FAILED"
  echo "setup_openenv: $1 (the OpenEnv tests will skip)" >&2
  exit 0
}
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for c in python3.11 python3.12 python3.10 python3; do command -v "$c" >/dev/null 2>&1 && { PY=$c; break; }; done
fi
[ -n "$PY" ] || fail "no python3 to create the openenv environment with"
mkdir -p "$(dirname "$VENV")"
free_kb=$(df -Pk "$(dirname "$VENV")" | awk 'NR==2 {print $4}')
[ "${free_kb:-0}" -ge 2000000 ] || fail "less than 2 GB free under $(dirname "$VENV") for openenv"
echo "setup_openenv: installing openenv==$VERSION into $VENV (first time only, a minute or two)"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" || fail "could not create a venv at $VENV with $PY"
export PIP_DISABLE_PIP_VERSION_CHECK=1
log=$VENV/pip-install.log
if ! "$VENV/bin/python" -m pip install "openenv==$VERSION" >"$log" 2>&1; then
  fail "pip install openenv==$VERSION failed: $(grep -E '^ERROR' "$log" | tail -n 1)"
fi
if ! "$VENV/bin/python" -c "import openenv.core.env_server.http_server, openenv.core.env_client" >>"$log" 2>&1; then
  fail "openenv==$VERSION installed but does not import: $(tail -n 1 "$log")"
fi
touch "$OK"
echo "setup_openenv: openenv ready at $VENV/bin/python"
