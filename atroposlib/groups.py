"""A group of scored sequences on its way from an env to the wire: build, normalize, validate.

    group = GroupBuilder()
    for node, score in zip(nodes, scores):
        group.add(node.tokens, node.masked_tokens, score, inference_logprobs=node.logprobs)
    return group.build(), []

Optional per-sequence fields (messages, inference_logprobs, advantages, overlong, ...) must be given
for every sequence or for none. A score of None (``score_samples`` could not score that sequence) is
no score, never a 0: the sequence is marked ``reward_statuses: "unavailable"`` and its score is a
placeholder (the mean of the others, so a reader that ignores the mark gives it no advantage);
with fewer than two scored sequences left the group has no learning signal and the whole group is
marked ``reward_status: "unavailable"``. ``add_node`` records whether a node's last reply was cut at
``max_tokens`` (``overlong``) from its ``finish_reason``. ``build()`` validates the group with the wire schema (``SchemaError`` names what
is wrong) and returns the validated ``ScoredData`` model; the runtime sends a model as it is, without
validating it again. A group an env builds as a plain ``ScoredDataGroup`` dict (Atropos's way) is
normalized (``normalize_group``) and validated once (``check_group``) when it is sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional, Union

from pydantic import ValidationError

from atroposlib.errors import SchemaError
from atroposlib.type_definitions import (
    ScoredData,
    ScoredDataGroup,
    ScoredDataItem,
    per_sequence_fields,
    validate_group,
)
from atroposlib.utils.settings_cli import error_message

_PER_SEQUENCE = per_sequence_fields()  # optional one-per-sequence fields, from the wire schema

Group = Union[ScoredDataGroup, ScoredData]
"""A group as an env returns it: Atropos's dict (validated when it is sent) or the model that
``GroupBuilder.build()`` validated (sent as it is)."""

Groups = Union[Optional[Group], list[Optional[Group]]]
"""What ``collect_trajectories`` / ``postprocess_histories`` give: one group, several, or None."""


class GroupBuilder:
    """Accumulates scored sequences of one item and builds the validated ``ScoredData`` model."""

    def __init__(
        self,
        *,
        generation_params: Optional[dict[str, Any]] = None,
        group_overrides: Optional[dict[str, Any]] = None,
        images: Any = None,
    ) -> None:
        self.tokens: list[list[int]] = []
        self.masks: list[list[int]] = []
        self.scores: list[Optional[float]] = []
        self.overlong: list[Optional[bool]] = []
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
        score: Optional[float],
        *,
        messages: Optional[Sequence[Mapping[str, Any]]] = None,
        inference_logprobs: Optional[Sequence[float]] = None,
        advantages: Optional[Sequence[float]] = None,
        ref_logprobs: Optional[Sequence[float]] = None,
        overrides: Optional[Mapping[str, Any]] = None,
        overlong: Optional[bool] = None,
        reward_unavailable: bool = False,
    ) -> GroupBuilder:
        """Add one sequence. ``score=None``: this sequence has no score (see the module docstring).
        ``overlong``: its last reply was cut at ``max_tokens``. ``reward_unavailable=True`` marks the
        whole group's reward as unavailable (infrastructure failure): the trainer masks it out
        instead of training on a 0."""
        if len(tokens) != len(masks):
            raise SchemaError(
                f"sequence {len(self.tokens)}: {len(tokens)} tokens but {len(masks)} masks"
            )
        if self.overlong and (overlong is None) != (self.overlong[0] is None):
            raise SchemaError(
                f"sequence {len(self.tokens)}: overlong given for some sequences but not others"
            )
        self.tokens.append(list(tokens))
        self.masks.append(list(masks))
        self.scores.append(None if score is None else float(score))
        self.overlong.append(None if overlong is None else bool(overlong))
        values: dict[str, Any] = {
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
        unavailable = item.get("reward_status") == "unavailable" or item.get("scores") is None
        self.add(
            item["tokens"],
            item["masks"],
            None if unavailable else item["scores"],
            messages=item.get("messages"),
            inference_logprobs=item.get("inference_logprobs"),
            advantages=item.get("advantages"),
            ref_logprobs=item.get("ref_logprobs"),
            overrides=item.get("overrides"),
            overlong=item.get("overlong"),
        )
        group_overrides = item.get("group_overrides")
        if group_overrides:
            self.group_overrides.update(group_overrides)
        return self

    def add_node(self, node: Any, score: Optional[float], **kwargs: Any) -> GroupBuilder:
        """Add a ``SequenceNode`` from ``managed_server`` (tokens, masked_tokens, logprobs, and
        whether its last reply was cut at ``max_tokens``)."""
        kwargs.setdefault("overlong", node_overlong(node))
        return self.add(
            node.tokens, node.masked_tokens, score, inference_logprobs=node.logprobs, **kwargs
        )

    def to_dict(self) -> ScoredDataGroup:
        """The group as a plain ``ScoredDataGroup`` dict, not validated (the runtime validates it
        once when it is sent); ``build()`` is the validated form."""
        known = [s for s in self.scores if s is not None]
        fill = sum(known) / len(known) if known else 0.0
        scores = [fill if s is None else s for s in self.scores]
        group: dict[str, Any] = {"tokens": self.tokens, "masks": self.masks, "scores": scores}
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
        if any(x is not None for x in self.overlong):
            group["overlong"] = [bool(x) for x in self.overlong]
        if self.reward_unavailable or (len(known) < min(2, len(scores))):
            group["reward_status"] = "unavailable"  # no learning signal left in the group
        elif len(known) < len(scores):
            group["reward_statuses"] = [
                "ok" if s is not None else "unavailable" for s in self.scores
            ]
        return group  # type: ignore[return-value]

    def build(self) -> ScoredData:
        """The validated group; raises ``SchemaError`` naming the field when it would be rejected."""
        return check_group(self.to_dict())


def node_overlong(node: Any) -> Optional[bool]:
    """Whether a tracked node's last reply was cut at ``max_tokens`` (None: it does not say)."""
    meta = getattr(node, "metadata", None) or {}
    if "overlong" in meta:
        return bool(meta["overlong"])
    if "finish_reason" in meta:
        return bool(meta["finish_reason"] == "length")
    return None


def check_group(group: Union[ScoredDataGroup, dict[str, Any]]) -> ScoredData:
    """Validate with the wire schema and return the model; raise ``SchemaError`` with the first
    problem, on one line."""
    try:
        return validate_group(group)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ())) or "group"
        raise SchemaError(f"invalid ScoredDataGroup ({loc}): {error_message(first)}") from None


def normalize_group(group: Union[ScoredDataGroup, dict[str, Any]]) -> dict[str, Any]:
    """Plain lists of plain numbers; drop None values and the empty lists Atropos's builder leaves."""
    g = {k: v for k, v in dict(group).items() if v is not None}
    n = len(g.get("tokens") or [])
    g["tokens"] = [[int(t) for t in seq] for seq in g.get("tokens") or []]
    g["masks"] = [[int(t) for t in seq] for seq in g.get("masks") or []]
    g["scores"] = [float(s) for s in g.get("scores") or []]
    for key in _PER_SEQUENCE:
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


def group_from_items(items: Iterable[Optional[ScoredDataItem]]) -> Optional[ScoredDataGroup]:
    """Combine ``collect_trajectory`` results into one group (None results are skipped); the dict
    is validated once, when it is sent.

    The dict has the keys Atropos's default ``collect_trajectories`` gives it, empty where no item
    set them (``advantages: []``, ``group_overrides: {}``, ``images`` one entry per item that has
    one), so a ``process`` file holds what Atropos's does; ``normalize_group`` drops the empties."""
    builder = GroupBuilder()
    images: list[Any] = []
    for item in items:
        if item is not None:
            builder.add_item(item)
            if item.get("images") is not None:
                images.append(item["images"])
    if not len(builder):
        return None
    group: dict[str, Any] = dict(builder.to_dict())
    for key in ("advantages", "ref_logprobs", "messages", "overrides"):
        group.setdefault(key, [])
    group.setdefault("group_overrides", {})
    group["images"] = images
    return group  # type: ignore[return-value]


__all__ = [
    "Group",
    "GroupBuilder",
    "Groups",
    "check_group",
    "group_from_items",
    "node_overlong",
    "normalize_group",
]
