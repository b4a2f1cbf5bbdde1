"""Fixtures of the trainer tests: a tiny model built on the spot."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    from atroposlib.inference.tiny_model import build_tiny_model

    return build_tiny_model(
        tmp_path_factory.mktemp("tiny") / "model", seed=0, hidden_size=32, num_layers=1, num_heads=2
    )
