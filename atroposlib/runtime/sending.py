"""From what an env returns to groups ready to leave: normalize, filter, validate, stamp, write.

``prepare_groups`` applies Atropos's rules (wrong group size, all-equal scores when
``ensure_scores_are_not_same``, too long for the trainer) and ours: every group is stamped with
``policy_version`` (the trainer step its generation started under), ``env_id`` and a ``group_id``,
and validated with the wire schema exactly once: a plain ``ScoredDataGroup`` dict here, a model that
``GroupBuilder.build()`` returned already validated (it is sent as it is). Every dropped group is
counted (``RunContext.drop_counts``) and logged with its reason. Groups whose ``reward_status`` is
``unavailable`` are never dropped for equal scores: the trainer masks them, they are not zeros;
sequences marked unavailable (``reward_statuses``) do not count in the comparison.

``send_groups`` is ``BaseEnv.handle_send_to_api``: prepare, record completion lengths and rollouts
for logging, append to the JSONL file, hand each group to the run's sink.

A JSONL line (``file_line``) holds every key Atropos writes: the env's own keys as the env set them
(an empty ``advantages: []`` stays an empty list, though the group sent on is normalized without
it) and each key of Atropos's ``ScoredDataGroup`` the env left out as null; ours (``group_id``,
``env_id``, ``policy_version``) come on top.
"""

from __future__ import annotations

import contextvars
import logging
import uuid
from typing import Any, Optional

from atroposlib.errors import SchemaError
from atroposlib.groups import Group, Groups, check_group, normalize_group
from atroposlib.runtime.config import BaseEnvConfig
from atroposlib.runtime.context import EnvRuntime, RunContext, TokenDecoder
from atroposlib.type_definitions import ATROPOS_GROUP_KEYS, Item, ScoredData, ScoredDataGroup

logger = logging.getLogger(__name__)

current_policy_version: contextvars.ContextVar[Optional[int]] = contextvars.ContextVar(
    "current_policy_version", default=None
)
"""Set by the runner when a worker starts: the trainer step the item is generated under."""


ATROPOS_LINE_KEYS: tuple[str, ...] = (*ATROPOS_GROUP_KEYS, "distill_token_ids", "distill_logprobs")
"""Keys every line of a groups file holds (Atropos 0.4's ``ScoredDataGroup``), null when unset."""


def file_line(group: ScoredDataGroup, raw: Any) -> dict[str, Any]:
    """What a groups file holds for ``group`` (see the module docstring); ``raw`` is what the env
    returned (its empty lists and nulls, which normalizing dropped, go back in)."""
    line: dict[str, Any] = dict(group)
    if isinstance(raw, dict):
        for key, value in raw.items():
            line.setdefault(key, value)
    for key in ATROPOS_LINE_KEYS:
        line.setdefault(key, None)
    return line


def _as_dict(raw: Group) -> tuple[dict[str, Any], bool]:
    """The group as a plain dict, and whether it still needs validating (a built model does not)."""
    if isinstance(raw, ScoredData):
        return dict(raw.as_group()), False
    return normalize_group(raw), True


def prepare_groups(
    scored_data: Groups,
    config: BaseEnvConfig,
    context: RunContext,
    tokenizer: Optional[TokenDecoder] = None,
    abort_on_any_max_length_exceeded: bool = True,
) -> list[ScoredDataGroup]:
    """Normalize, filter, stamp and (once) validate what ``collect_trajectories`` /
    ``postprocess_histories`` gave; drops are counted in ``context.drop_counts``."""
    return [
        group
        for group, _ in _prepare(
            scored_data, config, context, tokenizer, abort_on_any_max_length_exceeded
        )
    ]


def _prepare(
    scored_data: Groups,
    config: BaseEnvConfig,
    context: RunContext,
    tokenizer: Optional[TokenDecoder],
    abort_on_any_max_length_exceeded: bool,
) -> list[tuple[ScoredDataGroup, Any]]:
    """``prepare_groups``, each group paired with what the env returned for it."""
    drops = context.drop_counts
    items = scored_data if isinstance(scored_data, list) else [scored_data]
    out: list[tuple[ScoredDataGroup, Any]] = []
    for raw in items:
        if raw is None:
            continue
        if not isinstance(raw, (dict, ScoredData)):
            drops["not_a_group"] += 1
            logger.error(
                "dropping a %s returned where a ScoredDataGroup was expected", type(raw).__name__
            )
            continue
        group, unchecked = _as_dict(raw)
        unavailable = group.get("reward_status") == "unavailable"
        expected = (group.get("group_overrides") or {}).get("group_size", config.group_size)
        if len(group["tokens"]) != expected:
            drops["wrong_group_size"] += 1
            logger.warning(
                "dropping a group of %d sequences (expected group_size %d)",
                len(group["tokens"]),
                expected,
            )
            continue
        statuses = group.get("reward_statuses") or []
        scored = [
            s
            for i, s in enumerate(group["scores"])
            if i >= len(statuses) or statuses[i] != "unavailable"
        ]
        if config.ensure_scores_are_not_same and not unavailable and len(set(scored)) == 1:
            drops["same_scores"] += 1
            logger.info(
                "dropping a group whose scores are all %s (ensure_scores_are_not_same)",
                group["scores"][0],
            )
            continue
        max_len = context.max_token_len or -1
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
        if config.include_messages and "messages" not in group and tokenizer is not None:
            group["messages"] = [
                [{"role": "text", "content": tokenizer.decode(t)}] for t in group["tokens"]
            ]
        if not context.process_mode:  # `process` trains nothing: no policy version
            version = current_policy_version.get()
            group.setdefault(
                "policy_version", version if version is not None else max(0, int(context.curr_step))
            )
        group.setdefault("group_id", uuid.uuid4().hex)
        if context.env_id is not None:
            group["env_id"] = context.env_id
        if unchecked:
            try:
                check_group(group)
            except SchemaError as e:
                drops["invalid"] += 1
                logger.error("dropping an invalid group: %s", e)
                continue
        out.append((group, raw))  # type: ignore[arg-type]
    return out


async def send_groups(
    env: EnvRuntime, scored_data: Groups, item: Item, send: bool, abort_on_max_length: bool
) -> list[ScoredDataGroup]:
    """``handle_send_to_api``: prepare groups (``abort_on_max_length``: drop a group with any
    too-long sequence), save them to JSONL if configured, hand them to the sink when ``send``."""
    ctx = env.context
    prepared = _prepare(scored_data, env.config, ctx, env.tokenizer, abort_on_max_length)
    for group, raw in prepared:
        ctx.completion_lengths.extend(sum(1 for m in mask if m != -100) for mask in group["masks"])
        await env.add_rollouts_for_wandb(group, item)
        if ctx.jsonl_writer is not None:
            ctx.jsonl_writer.write(file_line(group, raw))
        if send:
            await ctx.group_sink.put(group)
    ctx.items_sent_this_step += len(prepared)
    return [group for group, _ in prepared]


__all__ = [
    "ATROPOS_LINE_KEYS",
    "current_policy_version",
    "file_line",
    "prepare_groups",
    "send_groups",
]
