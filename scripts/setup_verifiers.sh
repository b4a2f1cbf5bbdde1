#!/usr/bin/env bash
# Installs the `verifiers` extra (verifiers==0.4.0, only `verifiers.v1`) INTO the project's .venv, for the
# verifiers interop tests (tests/interop/test_verifiers_*.py). verifiers pins openai<3 (pip moves openai
# 3.x to 2.x; atroposlib works with both) and mcp==2.0.0; it pulls no torch.
#   - ATROPOS_SKIP_VERIFIERS=1: nothing is installed (the verifiers tests skip).
# A failed install never fails the caller: the reason is printed and the tests skip.
set -uo pipefail
cd "$(dirname "$0")/.."
VERSION=0.4.0   # keep equal to the `verifiers` extra in pyproject.toml
if [ "${ATROPOS_SKIP_VERIFIERS:-0}" = "1" ]; then
  echo "setup_verifiers: ATROPOS_SKIP_VERIFIERS=1, not installing (the verifiers tests skip)"
  exit 0
fi
PY=.venv/bin/python
if "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('verifiers') != '$VERSION')" 2>/dev/null; then
  exit 0
fi
echo "setup_verifiers: installing verifiers==$VERSION into .venv (about a minute)"
if ! "$PY" -m pip install -q "verifiers==$VERSION" 2>&1 | grep -v "is ignored"; then :; fi
if ! "$PY" -c "import verifiers.v1, openai" >/dev/null 2>&1; then
  echo "setup_verifiers: verifiers==$VERSION could not be installed; the verifiers tests skip" >&2
fi
exit 0
