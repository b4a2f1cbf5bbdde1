"""How a console script reads its arguments and reports a user mistake: one ``prog: error: message``
line on stderr, never a traceback.

Exit codes, the same in every command: 2 when the command is refused before it does any work (a bad
flag or value, a file that does not exist, a URL without ``http://``, a port that is taken); 1 when
it started and could not do its job (a server that does not answer, an input with nothing readable
in it, a run that failed); 0 otherwise. ``CliParser`` makes argparse's own usage errors that one line
too, and the ``*_int`` / ``*_float`` / ``port_number`` types check numbers while the flags are read.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

USAGE_ERROR = 2  # the command as given cannot run: nothing was done
FAILED = 1  # the command ran and could not do its job


def fail(prog: str, message: object, code: int = USAGE_ERROR) -> int:
    """Print ``prog: error: message`` on stderr and return ``code``, the exit status to return."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return code


class CliParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line (``prog: error: ...``, exit 2), without
    the usage block argparse prints first; ``--help`` still shows the full usage."""

    def error(self, message: str) -> NoReturn:
        fail(self.prog, message)
        raise SystemExit(USAGE_ERROR)


def _number(text: str, kind: type[int] | type[float]) -> int | float:
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer >= 1."""
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse ``type``: an integer >= 0."""
    value = int(_number(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_float(text: str) -> float:
    """An argparse ``type``: a finite number > 0."""
    value = float(_number(text, float))
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """An argparse ``type``: a finite number >= 0."""
    value = float(_number(text, float))
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def unit_float(text: str) -> float:
    """An argparse ``type``: a number from 0 to 1 (a share, a probability)."""
    value = float(_number(text, float))
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text!r}")
    return value


# The levels uvicorn and logging both know (uvicorn's "trace" is below debug).
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def check_log_level(value: str) -> str:
    """``value`` in lower case, or ``ValueError`` naming the levels (for a pydantic validator)."""
    low = value.strip().lower()
    if low not in LOG_LEVELS:
        raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
    return low


def port_number(text: str) -> int:
    """An argparse ``type``: a TCP port, 1 to 65535."""
    value = int(_number(text, int))
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be between 1 and 65535, got {value}")
    return value


__all__ = [
    "FAILED",
    "LOG_LEVELS",
    "USAGE_ERROR",
    "CliParser",
    "check_log_level",
    "fail",
    "non_negative_float",
    "non_negative_int",
    "port_number",
    "positive_float",
    "positive_int",
]
