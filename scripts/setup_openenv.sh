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
source "$(dirname "$0")/lib_cached_venv.sh"
cached_venv_start setup_openenv openenv ATROPOS_OPENENV_PYTHON ATROPOS_SKIP_OPENENV "the OpenEnv tests"
cached_venv_begin "${ATROPOS_OPENENV_VENV:-$HOME/.cache/atroposlib/openenv-$VERSION}" .atroposlib-openenv-ok
cached_venv_create 2 "openenv==$VERSION" "a minute or two"
cached_venv_pip_install "openenv==$VERSION"
cached_venv_verify "openenv==$VERSION" \
  "$VENV/bin/python" -c "import openenv.core.env_server.http_server, openenv.core.env_client"
cached_venv_done
