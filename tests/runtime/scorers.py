"""Scoring functions for ``test_scoring.py``, in a module of their own (stdlib only) so that worker
processes can import them: sample ``(item, j)`` scores ``j``, except one that blocks for 60 s and
one that raises."""

from __future__ import annotations

import time

BLOCKED = (3, 1)
RAISES = (5, 0)


def sleepy(sample: tuple[int, int]) -> float:
    """Blocks (sleeping) for 60 s on ``BLOCKED``."""
    if tuple(sample) == BLOCKED:
        time.sleep(60)
    if tuple(sample) == RAISES:
        raise ValueError("this sample cannot be scored")
    return float(sample[1])


def busy(sample: tuple[int, int]) -> float:
    """Blocks (spinning on the CPU, holding the GIL) for 60 s on ``BLOCKED``."""
    if tuple(sample) == BLOCKED:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            pass
    if tuple(sample) == RAISES:
        raise ValueError("this sample cannot be scored")
    return float(sample[1])
