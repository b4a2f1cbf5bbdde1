"""``atropos-dpo-gen``: write DPO data as JSONL from a trajectory API or a groups file (see docs/tools.md)."""

from __future__ import annotations

import sys
from typing import Optional

from atroposlib.datagen.cli import run


def main(argv: Optional[list[str]] = None) -> int:
    return run("dpo", argv)


if __name__ == "__main__":
    sys.exit(main())
