"""In-process app fixtures (TestClient over ``create_app``) for the API logic tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from atroposlib.api.app import create_app
from atroposlib.api.settings import ApiSettings


@pytest.fixture
def make_client(tmp_path: Path) -> Iterator[Callable[..., TestClient]]:
    """``make_client(store="sqlite", **settings)``: a TestClient on a fresh (or given) data dir."""
    clients: list[TestClient] = []

    def make(**kw: Any) -> TestClient:
        kw.setdefault("data_dir", tmp_path / "data")
        kw.setdefault("store", "sqlite")
        c = TestClient(create_app(ApiSettings(**kw)))
        c.__enter__()
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.__exit__(None, None, None)


@pytest.fixture(params=["sqlite", "memory"])
def client(request, make_client) -> TestClient:
    return make_client(store=request.param)
