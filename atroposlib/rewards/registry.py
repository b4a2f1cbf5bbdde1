"""Registry of reward functions by name, and their weighted combination.

``register("name")`` adds a plain function, ``get_reward_fn("name")`` finds it (unknown names
suggest the nearest), ``combine({"a": 1.0, "b": 0.2})`` builds a weighted sum. Context keys a
function does not take are not passed to it. ``registry`` is Atropos's class-aware view of the same
table (``registry.register`` takes ``RewardFunction`` classes, ``registry.create`` builds instances).
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional, Union

from atroposlib.errors import ConfigError
from atroposlib.rewards.reward_function import (
    FunctionReward,
    RewardFn,
    RewardFunction,
    call_reward_fn,
)

_REGISTRY: dict[str, RewardFn] = {}


def register(name: str) -> Callable[[RewardFn], RewardFn]:
    """Decorator: make ``fn`` available as ``name``."""

    def deco(fn: RewardFn) -> RewardFn:
        if name in _REGISTRY and _REGISTRY[name] is not fn:
            raise ValueError(f"reward function {name!r} is already registered")
        _REGISTRY[name] = fn
        return fn

    return deco


def registered_names() -> list[str]:
    return sorted(_REGISTRY)


def get_reward_fn(name: str) -> RewardFn:
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"unknown reward function {name!r}{hint} (known: {', '.join(registered_names())})"
        ) from None


WeightSpec = Union[Mapping[str, float], Iterable[tuple[Union[str, RewardFn], float]]]


def combine(weights: WeightSpec) -> RewardFn:
    """A reward function returning ``sum(weight * fn(...))`` over the given functions."""
    pairs = list(weights.items()) if isinstance(weights, Mapping) else list(weights)
    resolved = [(get_reward_fn(f) if isinstance(f, str) else f, float(w)) for f, w in pairs]
    resolved = [(f() if inspect.isclass(f) else f, w) for f, w in resolved]
    if not resolved:
        raise ConfigError("combine() needs at least one reward function")

    def combined(completions: list[str], **context: Any) -> list[float]:
        total = [0.0] * len(completions)
        for fn, w in resolved:
            for i, s in enumerate(call_reward_fn(fn, completions, **context)):
                total[i] += w * s
        return total

    combined.__name__ = (
        "combined(" + ", ".join(f"{getattr(f, '__name__', f)}*{w}" for f, w in resolved) + ")"
    )
    return combined


class RewardRegistry:
    """Atropos-style access: ``registry.create({"type": "format", "params": {...}})`` or ``"name"``.

    ``register`` takes a name (plain functions, ``@registry.register("name")``) or, as in Atropos,
    a ``RewardFunction`` class (``@registry.register`` / ``@registry.register(name="x")``)."""

    def register(self, cls: Any = None, name: Optional[str] = None) -> Any:
        if isinstance(cls, str):
            return register(cls)

        def deco(klass: Any) -> Any:
            if not (inspect.isclass(klass) and issubclass(klass, RewardFunction)):
                if name is not None and callable(klass):
                    return register(name)(klass)
                raise TypeError(f"{klass!r} is not a RewardFunction subclass")
            key = name or klass.__name__.lower()
            if name is None and key.endswith("reward") and len(key) > len("reward"):
                key = key[: -len("reward")]
            _REGISTRY[key] = klass
            return klass

        return deco if cls is None else deco(cls)

    def get(self, name: str) -> RewardFn:
        return get_reward_fn(name)

    def names(self) -> list[str]:
        return registered_names()

    def create(self, spec: Union[str, Mapping[str, Any]], **defaults: Any) -> Any:
        """A ``RewardFunction`` instance: registered classes are constructed with the spec's
        ``params`` (and ``weight``); plain functions are wrapped with their params bound."""
        if isinstance(spec, str):
            kind, params = spec, dict(defaults)
        elif isinstance(spec, Mapping) and "type" in spec:
            rest = {k: v for k, v in spec.items() if k not in ("type", "params")}
            kind, params = str(spec["type"]), {**defaults, **rest, **dict(spec.get("params") or {})}
        else:
            raise ConfigError(f"reward spec must be a name or a mapping with 'type', got {spec!r}")
        target = get_reward_fn(kind)
        if inspect.isclass(target):
            return target(**params)
        params.setdefault("name", kind)
        return FunctionReward(target, **params)


registry = RewardRegistry()


__all__ = [
    "RewardFn",
    "RewardRegistry",
    "registry",
    "call_reward_fn",
    "combine",
    "get_reward_fn",
    "register",
    "registered_names",
]
