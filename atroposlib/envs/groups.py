"""Builders for ``ScoredDataGroup`` so environments never fill the group dict key by key.

    group = GroupBuilder()
    for node, score in zip(nodes, scores):
        group.add(node.tokens, node.masked_tokens, score, inference_logprobs=node.logprobs)
    return group.build(), []

Optional per-sequence fields (messages, inference_logprobs, advantages, ...) must be given for every
sequence or for none; ``build()`` validates the result with the wire schema and names what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Optional

from pydantic import ValidationError

from atroposlib.errors import SchemaError
from atroposlib.type_definitions import (
    ScoredDataGroup,
    ScoredDataItem,
    per_sequence_fields,
    validate_group,
)

_PER_SEQUENCE = per_sequence_fields()  # optional one-per-sequence fields, from the wire schema


class GroupBuilder:
    """Accumulates scored sequences of one item and builds a validated ``ScoredDataGroup``."""

    def __init__(
        self,
        *,
        generation_params: Optional[dict[str, Any]] = None,
        group_overrides: Optional[dict[str, Any]] = None,
        images: Any = None,
    ) -> None:
        self.tokens: list[list[int]] = []
        self.masks: list[list[int]] = []
        self.scores: list[float] = []
        self.optional: dict[str, list[Any]] = {k: [] for k in _PER_SEQUENCE}
        self.generation_params = generation_params
        self.group_overrides = dict(group_overrides or {})
        self.images = images
        self.reward_unavailable = False

    def __len__(self) -> int:
        return len(self.tokens)

    def add(
        self,
        tokens: Sequence[int],
        masks: Sequence[int],
        score: float,
        *,
        messages: Optional[Sequence[dict[str, Any]]] = None,
        inference_logprobs: Optional[Sequence[float]] = None,
        advantages: Optional[Sequence[float]] = None,
        ref_logprobs: Optional[Sequence[float]] = None,
        overrides: Optional[dict[str, Any]] = None,
        reward_unavailable: bool = False,
    ) -> GroupBuilder:
        """Add one sequence. ``reward_unavailable=True`` marks the group's reward as unavailable
        (infrastructure failure): the trainer masks it out instead of training on a 0."""
        if len(tokens) != len(masks):
            raise SchemaError(
                f"sequence {len(self.tokens)}: {len(tokens)} tokens but {len(masks)} masks"
            )
        self.tokens.append(list(tokens))
        self.masks.append(list(masks))
        self.scores.append(float(score))
        values = {
            "messages": messages,
            "inference_logprobs": inference_logprobs,
            "advantages": advantages,
            "ref_logprobs": ref_logprobs,
            "overrides": overrides,
        }
        for key, value in values.items():
            if value is not None:
                self.optional[key].append(list(value) if key != "overrides" else dict(value))
            elif self.optional[key]:
                raise SchemaError(
                    f"sequence {len(self.tokens) - 1}: {key} missing but given for earlier sequences"
                )
        self.reward_unavailable = self.reward_unavailable or reward_unavailable
        return self

    def add_item(self, item: ScoredDataItem) -> GroupBuilder:
        """Add a ``ScoredDataItem`` (what ``collect_trajectory`` returns)."""
        self.add(
            item["tokens"],
            item["masks"],
            item["scores"],
            messages=item.get("messages"),
            inference_logprobs=item.get("inference_logprobs"),
            advantages=item.get("advantages"),
            ref_logprobs=item.get("ref_logprobs"),
            overrides=item.get("overrides"),
            reward_unavailable=item.get("reward_status") == "unavailable",
        )
        if item.get("group_overrides"):
            self.group_overrides.update(item["group_overrides"])
        return self

    def add_node(self, node: Any, score: float, **kwargs: Any) -> GroupBuilder:
        """Add a ``SequenceNode`` from ``managed_server`` (tokens, masked_tokens, logprobs)."""
        return self.add(
            node.tokens, node.masked_tokens, score, inference_logprobs=node.logprobs, **kwargs
        )

    def build(self, validate: bool = True) -> ScoredDataGroup:
        """The group dict; raises ``SchemaError`` naming the field when it would be rejected."""
        group: dict[str, Any] = {"tokens": self.tokens, "masks": self.masks, "scores": self.scores}
        for key, rows in self.optional.items():
            if rows:
                if len(rows) != len(self.tokens):
                    raise SchemaError(
                        f"{key} given for {len(rows)} of {len(self.tokens)} sequences"
                    )
                group[key] = rows
        if self.generation_params is not None:
            group["generation_params"] = self.generation_params
        if self.group_overrides:
            group["group_overrides"] = self.group_overrides
        if self.images is not None:
            group["images"] = self.images
        if self.reward_unavailable:
            group["reward_status"] = "unavailable"
        if validate:
            check_group(group)
        return group  # type: ignore[return-value]


def check_group(group: dict[str, Any]) -> None:
    """Validate with the wire schema; raise ``SchemaError`` with the first problem, one line."""
    try:
        validate_group(group)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ())) or "group"
        raise SchemaError(f"invalid ScoredDataGroup ({loc}): {first.get('msg')}") from None


def group_from_items(items: Iterable[Optional[ScoredDataItem]]) -> Optional[ScoredDataGroup]:
    """Combine ``collect_trajectory`` results into one group (None results are skipped)."""
    builder = GroupBuilder()
    for item in items:
        if item is not None:
            builder.add_item(item)
    return builder.build(validate=False) if len(builder) else None


__all__ = ["GroupBuilder", "check_group", "group_from_items"]
