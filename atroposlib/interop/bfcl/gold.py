"""A BFCL entry's gold answer as prompt-mode text: ``[f(a=1, b='x'), g(c=[1, 2])]``, each call with the
first value BFCL accepts for every parameter, optional parameters (whose first accepted value is ``""``,
BFCL's mark for "may be left out") left out. What a supervised warm-up trains on; the official checker
accepts it (tests/interop/bfcl check it on every training entry)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def gold_arguments(accepted: Mapping[str, Any]) -> dict[str, Any]:
    """``{param: [accepted values]}`` as ``{param: first value}``, optional ones left out (a value
    that is not a list of accepted values is taken as it is)."""
    out = {}
    for k, values in accepted.items():
        if not isinstance(values, list):
            out[k] = values
        elif values and values[0] != "":
            out[k] = gold_value(values[0])
    return out


def gold_value(value: Any) -> Any:
    """An accepted value as the model should write it: a dict value is itself a mapping of keys to
    accepted values (BFCL nests them), so its keys take their first values too, also inside lists."""
    if isinstance(value, dict):
        return gold_arguments(value)
    if isinstance(value, list):
        return [gold_value(v) if isinstance(v, dict) else v for v in value]
    return value


def gold_call(name: str, accepted: Mapping[str, Any]) -> str:
    """One call, ``name(param=value, ...)``, with the first accepted value of each given parameter."""
    args = ", ".join(f"{k}={v!r}" for k, v in gold_arguments(accepted).items())
    return f"{name}({args})"


def gold_text(ground_truth: Sequence[Mapping[str, Mapping[str, Any]]]) -> str:
    """Every expected call, in BFCL's order, as one Python list."""
    calls = [gold_call(name, accepted) for call in ground_truth for name, accepted in call.items()]
    return f"[{', '.join(calls)}]"


__all__ = ["gold_arguments", "gold_call", "gold_text", "gold_value"]
