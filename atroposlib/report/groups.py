"""Reading scored groups and turning them into a display model shared by the report and ``view-run``.

Sources of groups: JSONL files written by ``serve``/``process`` (one group per line), ``GET /peek``
records (``{"seq", "env_name", "group": {...}}``) and plain iterables of ``ScoredDataGroup`` dicts.
``GroupView`` is what the renderers consume: the group's prompt when every sequence has the same one,
and per sequence its own prompt (when the prompts differ), its completion (messages, or decoded text
in trained / untrained stretches, or bare token ids), score, masks and logprobs.
A sequence's completion starts at its own first trained token (its masks), never at the prefix the
group's sequences happen to share: completions that begin with the same tokens keep them, and a
sequence whose prompt differs from the others' (another question, a first trained token elsewhere in
a multi-turn sequence) shows its own prompt. Decoded text is cut only where it splits cleanly
(``report.spans``), so no character is broken into U+FFFD halves.

Nothing here renders HTML and nothing imports torch; a tokenizer is optional (``decode`` callable).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from atroposlib.errors import SchemaError
from atroposlib.report.spans import TextSpan, decoded_spans, prompt_and_completion, split_text
from atroposlib.type_definitions import MASK_IGNORE, first_trained

log = logging.getLogger(__name__)

GroupDict = dict[str, Any]
GroupsInput = Union[str, Path, Iterable[GroupDict]]
Decoder = Callable[[list[int]], str]


@dataclass
class LoadStats:
    """What reading a JSONL file found: lines read, groups yielded, lines skipped (with reasons)."""

    lines: int = 0
    groups: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def unwrap_record(record: Any) -> list[GroupDict]:
    """The group dicts inside one JSONL record: a group, a peek record (``{"group": ...}``), a
    ``{"batch": [...]}`` answer or a list of groups. Raises ``SchemaError`` for anything else."""
    if isinstance(record, list):
        out: list[GroupDict] = []
        for r in record:
            out.extend(unwrap_record(r))
        return out
    if not isinstance(record, dict):
        raise SchemaError(f"expected a JSON object (a group), got {type(record).__name__}")
    if "scores" in record:
        return [record]
    if isinstance(record.get("group"), dict):
        inner = dict(record["group"])
        for key in ("env_name", "seq", "state", "received_at"):
            if record.get(key) is not None:
                inner[key] = record[key]  # the API's view (registered env name) wins
        return [inner]
    if isinstance(record.get("batch"), list):
        return unwrap_record(record["batch"])
    raise SchemaError("JSON object has no 'scores' (not a scored group)")


def iter_groups_jsonl(
    path: Union[str, Path], stats: Optional[LoadStats] = None
) -> Iterator[GroupDict]:
    """Yield the groups of a JSONL file. Unparseable lines are logged and counted in ``stats``
    (never silently dropped); a missing file raises ``FileNotFoundError``."""
    stats = stats if stats is not None else LoadStats()
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no such file: {p}")
    with p.open("r", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            stats.lines += 1
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                log.warning("%s:%d: invalid JSON (%s); line skipped", p, lineno, e)
                stats.skip("invalid JSON")
                continue
            try:
                groups = unwrap_record(record)
            except SchemaError as e:
                log.warning("%s:%d: %s; line skipped", p, lineno, e)
                stats.skip("not a scored group")
                continue
            for g in groups:
                stats.groups += 1
                yield g


def iter_groups(source: GroupsInput, stats: Optional[LoadStats] = None) -> Iterator[GroupDict]:
    """Groups from a JSONL path or from an iterable of group dicts / peek records."""
    if isinstance(source, (str, Path)):
        yield from iter_groups_jsonl(source, stats)
        return
    for record in source:
        if hasattr(record, "model_dump"):
            record = record.model_dump(exclude_none=True)
        yield from unwrap_record(record)


# ----------------------------------------------------------------------------------------------
# Display model
# ----------------------------------------------------------------------------------------------
@dataclass
class SequenceView:
    """One sequence of a group as shown to a person."""

    index: int
    score: Optional[float]
    completion_messages: list[dict[str, Any]]  # the turns after the shared prompt (may be empty)
    completion_text: Optional[str]  # decoded completion tokens (when no messages and a tokenizer)
    tokens: list[int]
    masks: list[int]
    logprobs: Optional[list[float]]
    advantages: Optional[list[float]]
    reward_status: Optional[str] = None
    completion_start: int = 0  # index of the first token shown as completion (its masks' split)
    prompt_text: Optional[str] = (
        None  # this sequence's own decoded prompt (tokens before the start)
    )
    completion_spans: list[TextSpan] = field(default_factory=list)  # completion_text, by mask

    @property
    def trained_tokens(self) -> int:
        return sum(1 for m in self.masks if m != MASK_IGNORE)

    @property
    def first_trained(self) -> int:
        """Index of the first trained token (the start of the completion), or len(tokens)."""
        for i, m in enumerate(self.masks):
            if m != MASK_IGNORE:
                return i
        return len(self.tokens)


@dataclass
class GroupView:
    """A group as shown to a person: its prompt (when shared) + one ``SequenceView`` per sequence.
    ``prompt_shared`` is False when the sequences' prompt tokens differ; then ``prompt_text`` and
    ``prompt_token_count`` are empty and each sequence carries its own prompt."""

    index: int
    env_name: Optional[str]
    env_id: Optional[int]
    policy_version: Optional[int]
    group_id: Optional[str]
    seq: Optional[int]
    state: Optional[str]
    received_at: Optional[float]
    prompt_messages: list[dict[str, Any]]
    prompt_text: Optional[str]
    prompt_token_count: int
    sequences: list[SequenceView]
    images: list[str]
    extra: dict[str, Any]
    prompt_shared: bool = True

    @property
    def scores(self) -> list[float]:
        return [s.score for s in self.sequences if s.score is not None]

    @property
    def max_score(self) -> Optional[float]:
        return max(self.scores) if self.scores else None

    @property
    def mean_score(self) -> Optional[float]:
        return sum(self.scores) / len(self.scores) if self.scores else None

    @property
    def min_score(self) -> Optional[float]:
        return min(self.scores) if self.scores else None

    @property
    def env_label(self) -> str:
        """The env's name, else ``env <id>``, else '' (nothing is shown rather than a guess)."""
        if self.env_name:
            return str(self.env_name)
        return f"env {self.env_id}" if self.env_id is not None else ""


def _as_message(m: Any) -> dict[str, Any]:
    if isinstance(m, dict):
        return m
    return {"role": "text", "content": m}


def _conversation(raw: Any) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if isinstance(raw, list):
        return [_as_message(m) for m in raw]
    return [_as_message(raw)]


def shared_message_prefix(conversations: Sequence[list[dict[str, Any]]]) -> int:
    """How many leading messages are identical in every conversation (the shared prompt).
    A single conversation keeps its last message as the completion."""
    n = common_token_prefix(conversations)
    if conversations and n == min(len(c) for c in conversations) and n > 0:
        n -= 1  # never swallow a whole conversation into the prompt
    return n


def common_token_prefix(rows: Sequence[Sequence[Any]]) -> int:
    """Length of the longest common prefix of the rows (token ids, or messages)."""
    if not rows:
        return 0
    shortest = min(len(r) for r in rows)
    n = 0
    while n < shortest and all(r[n] == rows[0][n] for r in rows):
        n += 1
    return n


def _floats(v: Any) -> Optional[float]:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def _row(rows: Any, i: int) -> Optional[list[Any]]:
    if isinstance(rows, list) and i < len(rows) and isinstance(rows[i], list):
        return rows[i]
    return None


_IMAGE_PREFIXES = (
    "data:image/png;base64,",
    "data:image/jpeg;base64,",
    "data:image/gif;base64,",
    "data:image/webp;base64,",
)


def _image_urls(images: Any) -> list[str]:
    """Inline data-URL images of a multimodal group (base64 strings get a PNG prefix); others are
    ignored (never fetched)."""
    out: list[str] = []
    stack = [images]
    while stack:
        cur = stack.pop(0)
        if isinstance(cur, list):
            stack[0:0] = cur
        elif isinstance(cur, str):
            if cur.startswith(_IMAGE_PREFIXES):
                out.append(cur)
            elif len(cur) > 64 and all(c.isalnum() or c in "+/=\n" for c in cur[:200]):
                out.append("data:image/png;base64," + cur)
    return out


def build_view(group: GroupDict, index: int = 0, decode: Optional[Decoder] = None) -> GroupView:
    """The display model of one group. Tolerates partial groups (missing masks, messages, scores)."""
    tokens: list[list[int]] = [r for r in group.get("tokens") or [] if isinstance(r, list)]
    scores = group.get("scores") or []
    n = max(len(tokens), len(scores), len(group.get("messages") or []))
    conversations = [_conversation(c) for c in (group.get("messages") or [])]
    k = shared_message_prefix(conversations) if conversations else 0
    prompt_messages = conversations[0][:k] if conversations else []

    # where each sequence's completion starts: its first trained token; a sequence with nothing
    # trained (or no masks) starts where the group's first trained sequence does
    starts = [first_trained(_row(group.get("masks"), i) or []) for i in range(len(tokens))]
    fallback = next((x for x in starts if x is not None), 0)

    statuses = group.get("reward_status")
    seqs: list[SequenceView] = []
    for i in range(n):
        toks = tokens[i] if i < len(tokens) else []
        masks = _row(group.get("masks"), i) or [MASK_IGNORE] * len(toks)
        own_start = starts[i] if i < len(starts) else None
        start = min(own_start if own_start is not None else fallback, len(toks))
        prompt: Optional[str] = None
        spans: list[TextSpan] = []
        if i >= len(conversations) and decode is not None and toks:
            if own_start is not None:
                prompt, spans = prompt_and_completion(decoded_spans(toks, masks, decode))
                start = spans[0].start if spans else len(toks)
            else:  # nothing trained: cut where the others' completions start
                prompt, rest, start = split_text(toks, start, decode)
                spans = [TextSpan(rest, False, start, len(toks))] if rest else []
        seqs.append(
            SequenceView(
                index=i,
                score=_floats(scores[i]) if i < len(scores) else None,
                completion_messages=conversations[i][k:] if i < len(conversations) else [],
                completion_text="".join(s.text for s in spans) if prompt is not None else None,
                tokens=toks,
                masks=masks,
                logprobs=_row(group.get("inference_logprobs"), i),
                advantages=_row(group.get("advantages"), i),
                reward_status=statuses if isinstance(statuses, str) else None,
                completion_start=start,
                prompt_text=prompt,
                completion_spans=spans,
            )
        )
    # the prompt is shown once only when it is really the same for every sequence
    token_rows = [s for s in seqs[len(conversations) :] if s.tokens]
    shared = len({tuple(s.tokens[: s.completion_start]) for s in token_rows}) <= 1
    prompt_len = token_rows[0].completion_start if token_rows and shared else 0
    prompt_text = None
    if shared and token_rows:
        prompt_text = token_rows[0].prompt_text if prompt_len else None
        for s in token_rows:
            s.prompt_text = None  # shown once, for the group
    known = {
        "tokens",
        "masks",
        "scores",
        "messages",
        "inference_logprobs",
        "advantages",
        "ref_logprobs",
        "images",
        "env_id",
        "env_name",
        "policy_version",
        "group_id",
        "seq",
        "distill_token_ids",
        "distill_logprobs",
        "reward_status",
        "state",
        "received_at",
    }
    extra = {k2: v for k2, v in group.items() if k2 not in known and v is not None}
    return GroupView(
        index=index,
        env_name=group.get("env_name"),
        env_id=group.get("env_id"),
        policy_version=group.get("policy_version"),
        group_id=group.get("group_id"),
        seq=group.get("seq"),
        state=group.get("state"),
        received_at=_floats(group.get("received_at")),
        prompt_messages=prompt_messages,
        prompt_text=prompt_text,
        prompt_token_count=prompt_len,
        sequences=seqs,
        images=_image_urls(group.get("images")),
        extra=extra,
        prompt_shared=shared,
    )


__all__ = [
    "Decoder",
    "GroupDict",
    "GroupView",
    "GroupsInput",
    "LoadStats",
    "SequenceView",
    "build_view",
    "common_token_prefix",
    "iter_groups",
    "iter_groups_jsonl",
    "shared_message_prefix",
    "unwrap_record",
]
