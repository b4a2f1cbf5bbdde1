"""Reading the JSONL files our writers produce (groups, samples, metrics) in tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[Any]:
    """The complete JSON lines of ``path`` ([] while it does not exist). Lines end at ``\\n`` only:
    ``str.splitlines`` would also split inside strings holding U+2028 or U+0085, which a JSON writer
    may leave raw (a random tiny model generates them). A last line still being written (no
    ``\\n`` yet) is left out."""
    if not path.exists():
        return []
    *complete, _partial = path.read_text(encoding="utf-8").split("\n")
    return [json.loads(x) for x in complete if x.strip()]
