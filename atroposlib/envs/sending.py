"""From what an env returns to groups ready to leave: normalize, filter, validate, stamp, write.

``prepare_groups`` applies Atropos's rules (wrong group size, all-equal scores when
``ensure_scores_are_not_same``, too long for the trainer) and ours: every group is validated with
the wire schema, stamped with ``policy_version`` (the trainer step its generation started under),
``env_id`` and a ``group_id``. Every dropped group is counted and logged with its reason.
Groups whose ``reward_status`` is ``unavailable`` are never dropped for equal scores: the trainer
masks them, they are not zeros.
"""

from __future__ import annotations

import contextvars
import logging
import os
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Protocol, Union

import orjson

from atroposlib.envs.groups import check_group
from atroposlib.errors import SchemaError
from atroposlib.type_definitions import per_sequence_fields

if TYPE_CHECKING:  # context.py names GroupSink from here
    from atroposlib.envs.context import EnvRuntime

logger = logging.getLogger(__name__)

current_policy_version: contextvars.ContextVar[Optional[int]] = contextvars.ContextVar(
    "current_policy_version", default=None
)
"""Set by the runner when a worker starts: the trainer step the item is generated under."""

_OPTIONAL_ROWS = per_sequence_fields()  # Atropos's builder may leave these as empty lists


class GroupSink(Protocol):
    async def put(self, group: dict[str, Any]) -> None: ...


class NullSink:
    """Where groups go when nothing consumes them (e.g. a bare env in a notebook)."""

    def __init__(self) -> None:
        self.count = 0

    async def put(self, group: dict[str, Any]) -> None:
        self.count += 1


class JsonlGroupWriter:
    """Appends one group per line and flushes it, so the file is valid after any interruption.
    An existing file is never overwritten: ``x.jsonl`` becomes ``x_1.jsonl`` (as Atropos does)."""

    def __init__(self, path: Union[str, Path], overwrite: bool = False) -> None:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        if not overwrite:
            original, counter = p, 1
            while p.exists():
                p = original.with_name(f"{original.stem}_{counter}{original.suffix}")
                counter += 1
            if p != original:
                logger.warning("%s exists; writing groups to %s instead", original, p)
        self.path = p
        self._f = open(p, "ab")
        self.count = 0

    def write(self, group: dict[str, Any]) -> None:
        self._f.write(orjson.dumps(group, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        self._f.flush()
        os.fsync(self._f.fileno())
        self.count += 1

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()


def normalize_group(group: dict[str, Any]) -> dict[str, Any]:
    """Plain lists of plain numbers; drop None values and the empty lists Atropos's builder leaves."""
    g = {k: v for k, v in dict(group).items() if v is not None}
    n = len(g.get("tokens") or [])
    g["tokens"] = [[int(t) for t in seq] for seq in g.get("tokens") or []]
    g["masks"] = [[int(t) for t in seq] for seq in g.get("masks") or []]
    g["scores"] = [float(s) for s in g.get("scores") or []]
    for key in _OPTIONAL_ROWS:
        if key in g and isinstance(g[key], (list, tuple)) and len(g[key]) == 0 and n > 0:
            del g[key]  # Atropos's default builder leaves empty lists for absent fields
    if "messages" in g:
        g["messages"] = [[dict(m) for m in conv] for conv in g["messages"]]
    if "inference_logprobs" in g:
        g["inference_logprobs"] = [[float(x) for x in row] for row in g["inference_logprobs"]]
    if g.get("images") == []:
        del g["images"]
    if g.get("group_overrides") == {}:
        del g["group_overrides"]
    return g


def prepare_groups(
    env: EnvRuntime,
    scored_data: Any,
    abort_on_any_max_length_exceeded: bool = True,
    drops: Optional[Counter] = None,
) -> list[dict[str, Any]]:
    """Normalize, filter and validate what ``collect_trajectories``/``postprocess_histories`` gave."""
    drops = drops if drops is not None else Counter()
    items = scored_data if isinstance(scored_data, list) else [scored_data]
    out: list[dict[str, Any]] = []
    for raw in items:
        if raw is None:
            continue
        if not isinstance(raw, dict):
            drops["not_a_group"] += 1
            logger.error(
                "dropping a %s returned where a ScoredDataGroup was expected", type(raw).__name__
            )
            continue
        group = normalize_group(raw)
        unavailable = group.get("reward_status") == "unavailable"
        expected = (group.get("group_overrides") or {}).get("group_size", env.config.group_size)
        if len(group["tokens"]) != expected:
            drops["wrong_group_size"] += 1
            logger.warning(
                "dropping a group of %d sequences (expected group_size %d)",
                len(group["tokens"]),
                expected,
            )
            continue
        if (
            env.config.ensure_scores_are_not_same
            and not unavailable
            and len(set(group["scores"])) == 1
        ):
            drops["same_scores"] += 1
            logger.info(
                "dropping a group whose scores are all %s (ensure_scores_are_not_same)",
                group["scores"][0],
            )
            continue
        max_len = env.max_token_len or -1
        if (
            abort_on_any_max_length_exceeded
            and max_len > 0
            and any(len(t) > max_len for t in group["tokens"])
        ):
            drops["too_long"] += 1
            logger.warning(
                "dropping a group with a sequence longer than the trainer's max_token_len %d",
                max_len,
            )
            continue
        if env.config.include_messages and "messages" not in group:
            group["messages"] = [
                [{"role": "text", "content": env.tokenizer.decode(t)}] for t in group["tokens"]
            ]
        if not env.process_mode:  # `process` trains nothing: no policy version
            version = current_policy_version.get()
            group.setdefault(
                "policy_version", version if version is not None else max(0, int(env.curr_step))
            )
        group.setdefault("group_id", uuid.uuid4().hex)
        if env.env_id is not None:
            group["env_id"] = env.env_id
        try:
            check_group(group)
        except SchemaError as e:
            drops["invalid"] += 1
            logger.error("dropping an invalid group: %s", e)
            continue
        out.append(group)
    return out


__all__ = [
    "GroupSink",
    "JsonlGroupWriter",
    "NullSink",
    "current_policy_version",
    "normalize_group",
    "prepare_groups",
]
