"""Fixtures of the BFCL tests: the official checker (bfcl-eval in its own environment, made by
``scripts/setup_bfcl.sh``; ``ATROPOS_BFCL_PYTHON`` for a user's own), one worker process for the whole
session; where there is none, every test that needs it skips with the set-up's recorded reason."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from atroposlib.interop.bfcl import BfclChecker, bfcl_missing


def bfcl_skip_reason() -> str | None:
    """Why the BFCL tests cannot run here (the set-up's recorded failure, or what to install)."""
    return bfcl_missing()


@pytest.fixture(scope="session")
def bfcl_checker() -> Iterator[BfclChecker]:
    reason = bfcl_skip_reason()
    if reason:
        pytest.skip(reason)
    with BfclChecker.start() as checker:
        yield checker
