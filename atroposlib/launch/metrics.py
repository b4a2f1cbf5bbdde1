"""Reading the trainer's ``metrics.jsonl`` (one JSON object per step) from the launcher's side."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Every complete row of ``path`` (a half-written last line is left out)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    rows = []
    for line in text.split("\n"):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def mirror_lines(src: Path, dst: Path) -> list[str]:
    """Append the whole lines of ``src`` that ``dst`` lacks to ``dst`` (the trainer's metrics into the
    run directory as they are written); returns the new lines. When ``src`` no longer starts with what
    ``dst`` holds (a resumed trainer rewrote it without the steps it trains again), ``dst`` is
    replaced by ``src``'s whole lines and nothing counts as new."""
    try:
        data = src.read_bytes()
    except OSError:
        return []
    have = dst.stat().st_size if dst.exists() else 0
    end = data.rfind(b"\n") + 1  # whole lines only
    if have:
        with open(dst, "rb") as fh:
            fh.seek(max(0, have - 512))
            tail = fh.read()
        if end < have or data[have - len(tail) : have] != tail:
            tmp = dst.with_name(dst.name + ".tmp")
            tmp.write_bytes(data[:end])
            os.replace(tmp, dst)
            return []
    if end <= have:
        return []
    new = data[have:end]
    with open(dst, "ab") as fh:
        fh.write(new)
    return new.decode(errors="replace").splitlines()


def last_step(path: Path) -> Optional[dict[str, Any]]:
    rows = read_rows(path)
    return rows[-1] if rows else None


__all__ = ["last_step", "mirror_lines", "read_rows"]
