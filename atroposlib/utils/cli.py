"""How a console script reports a user mistake: one ``prog: error: message`` line, never a traceback."""

from __future__ import annotations

import sys


def fail(prog: str, message: object, code: int = 2) -> int:
    """Print ``prog: error: message`` on stderr and return ``code``, the exit status to return."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return code


__all__ = ["fail"]
