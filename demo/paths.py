"""Where the demo finds the checkout it runs from: the repository root, its environments and runs/."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENVIRONMENTS = REPO / "environments"
RUNS = REPO / "runs"
