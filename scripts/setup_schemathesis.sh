#!/usr/bin/env bash
# Gives the schema-fuzzing tier (tests/fuzz) the real `schemathesis`, in its own environment: its
# dependencies (hypothesis, jsonschema, ...) stay out of the project's venv. Outside the repo so that
# repeated runs on one machine reuse it:
#   - ATROPOS_SCHEMATHESIS_PYTHON set: that Python's schemathesis is used; nothing is installed.
#   - ATROPOS_SKIP_SCHEMATHESIS=1: nothing is installed (the fuzz tests skip).
#   - otherwise: schemathesis==<version> goes into
#     ${ATROPOS_SCHEMATHESIS_VENV:-$HOME/.cache/atroposlib/schemathesis-<version>} (about a minute and
#     ~100 MB the first time).
# A failed install never fails the caller: the reason goes to install-failed.txt in that folder, is printed,
# and the tests skip with it; delete that file to try again.
set -uo pipefail
VERSION=4.32.5   # keep equal to SCHEMATHESIS_VERSION in tests/fuzz/conftest.py
source "$(dirname "$0")/lib_cached_venv.sh"
cached_venv_start setup_schemathesis schemathesis ATROPOS_SCHEMATHESIS_PYTHON ATROPOS_SKIP_SCHEMATHESIS \
  "the schema-fuzzing tests"
cached_venv_begin "${ATROPOS_SCHEMATHESIS_VENV:-$HOME/.cache/atroposlib/schemathesis-$VERSION}" \
  .atroposlib-schemathesis-ok
cached_venv_create 1 "schemathesis==$VERSION" "about a minute"
cached_venv_pip_install "schemathesis==$VERSION"
cached_venv_verify "schemathesis==$VERSION" "$VENV/bin/python" -c "import schemathesis, hypothesis"
cached_venv_done
