"""From an API batch (a list of scored groups) to padded training tensors.

``flatten_batch`` turns groups into ``Sequence`` records (advantages computed; groups whose reward
is unavailable, and sequences marked so in ``reward_statuses``, left out and counted; sequences cut
at ``max_tokens`` (the group's ``overlong`` flags) kept, masked or penalized as ``overlong`` says,
counted); ``split_micro_batches`` sorts them by length and cuts them into micro-batches
(a fixed count, or a padded-token budget); ``collate`` pads one micro-batch into tensors aligned on
*target* positions: row t of every tensor describes the prediction of token t+1 from tokens <= t.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Optional, TypeVar

import torch

from atroposlib.errors import SchemaError
from atroposlib.type_definitions import MASK_IGNORE

from .losses import group_advantages, shuffled_scores

if TYPE_CHECKING:
    from .packed_layout import PackedLayout

T = TypeVar("T")


@dataclass
class Sequence:
    """One trainable sequence, every per-token list aligned with ``tokens``."""

    tokens: list[int]
    trained: list[bool]
    advantages: list[float]
    score: float
    inf_logprobs: Optional[list[float]] = None
    ref_logprobs: Optional[list[float]] = None
    distill_ids: Optional[list[list[int]]] = None
    distill_logprobs: Optional[list[list[float]]] = None
    temperature: float = 1.0  # the trainer divides this sequence's logits by it
    # the oldest weights version (trainer step) that generated its tokens: the server's report
    # (``weights_versions``), else the group's ``policy_version``; None when neither is known
    version: Optional[int] = None
    version_reported: bool = False  # ``version`` came from the server (weights_versions)


@dataclass
class FlatBatch:
    sequences: list[Sequence]
    group_scores: list[float] = field(default_factory=list)  # mean score of each trained group
    masked_groups: int = 0  # reward_status == "unavailable"
    unscored: int = 0  # sequences marked "unavailable" in reward_statuses, left out
    advantages_from_env: int = 0
    truncated: int = 0  # sequences cut at seq_len
    distill_missing: int = 0  # sequences without teacher data in a batch where others have it
    overlong: int = 0  # sequences flagged as cut at max_tokens
    overlong_masked: int = 0  # ... left out of the loss (overlong="mask")
    overlong_penalized: int = 0  # ... whose reward was lowered (overlong="penalize")


def _row(group: dict[str, Any], key: str, i: int, n: int) -> Optional[list[Any]]:
    rows = group.get(key)
    return None if rows is None else rows[i][:n]


OverlongMode = Literal["keep", "mask", "penalize"]


def flatten_batch(
    groups: list[dict[str, Any]],
    *,
    seq_len: int,
    advantage_mode: str = "grpo",
    shuffle_generator: Optional[torch.Generator] = None,
    temperature: float = 1.0,
    temperature_from_groups: bool = False,
    overlong: OverlongMode = "keep",
    overlong_penalty: float = 1.0,
) -> FlatBatch:
    """Flatten groups into sequences; ``shuffle_generator`` set = the shuffled-reward control.

    Each sequence's logit temperature is ``temperature``, or (``temperature_from_groups``) its group's
    ``generation_params["temperature"]`` when the group carries one. A sequence the group marks
    ``overlong`` is trained as any other (``keep``), left out of the loss while still counting in its
    group's baseline (``mask``), or has ``overlong_penalty`` taken off its reward before the
    advantages are computed (``penalize``); the reported scores are the env's."""
    out = FlatBatch(sequences=[])
    for g in groups:
        if g.get("reward_status") == "unavailable":
            out.masked_groups += 1
            continue
        n = len(g["tokens"])
        statuses = g.get("reward_statuses") or ["ok"] * n
        keep = [i for i in range(n) if statuses[i] != "unavailable"]
        out.unscored += n - len(keep)
        if not keep:
            continue
        scores = [float(g["scores"][i]) for i in keep]
        flags = [bool((g.get("overlong") or [False] * n)[i]) for i in keep]
        out.overlong += sum(flags)
        out.group_scores.append(sum(scores) / len(scores))
        temp = group_temperature(g, temperature) if temperature_from_groups else temperature
        group_version = g.get("policy_version")
        spans = g.get("weights_versions")
        env_adv = g.get("advantages")
        if env_adv is not None:
            out.advantages_from_env += 1
        else:
            train_scores = list(scores)
            if overlong == "penalize":
                train_scores = [
                    s - overlong_penalty * f for s, f in zip(scores, flags, strict=True)
                ]
                out.overlong_penalized += sum(flags)
            if shuffle_generator:
                train_scores = shuffled_scores(train_scores, shuffle_generator)
            seq_adv = group_advantages(train_scores, advantage_mode)
        for j, i in enumerate(keep):
            if flags[j] and overlong == "mask":
                out.overlong_masked += 1
                continue
            toks = g["tokens"][i]
            n_tok = min(len(toks), seq_len)
            out.truncated += int(len(toks) > seq_len)
            masks = g["masks"][i][:n_tok]
            adv = (
                [float(a) for a in env_adv[i][:n_tok]]
                if env_adv is not None
                else [seq_adv[j]] * n_tok
            )
            out.sequences.append(
                Sequence(
                    tokens=[int(t) for t in toks[:n_tok]],
                    trained=[m != MASK_IGNORE for m in masks],
                    advantages=adv,
                    score=scores[j],
                    inf_logprobs=_row(g, "inference_logprobs", i, n_tok),
                    ref_logprobs=_row(g, "ref_logprobs", i, n_tok),
                    distill_ids=_row(g, "distill_token_ids", i, n_tok),
                    distill_logprobs=_row(g, "distill_logprobs", i, n_tok),
                    temperature=temp,
                    version=int(spans[i][0]) if spans else group_version,
                    version_reported=bool(spans),
                )
            )
    have = sum(q.distill_ids is not None for q in out.sequences)
    if have:
        out.distill_missing = len(out.sequences) - have
    return out


def group_temperature(group: dict[str, Any], default: float) -> float:
    """The sampling temperature a group's ``generation_params`` records (``default`` if none).

    Temperature 0 (greedy) has no tempered distribution: such groups are read at temperature 1."""
    params = group.get("generation_params") or {}
    value = params.get("temperature") if isinstance(params, dict) else None
    if value is None:
        return default
    try:
        t = float(value)
    except (TypeError, ValueError):
        t = float("nan")
    if not math.isfinite(t) or t < 0:
        raise SchemaError(
            f"group {group.get('group_id')!r}: generation_params.temperature must be a number >= 0, "
            f"got {value!r}"
        )
    return t if t > 0 else 1.0


def split_micro_batches(
    items: list[T], *, num_micro_batches: int = 1, max_tokens: int = 0, length: Any = None
) -> list[list[T]]:
    """Sort by length and cut into ``num_micro_batches`` (or by a padded-token budget ``max_tokens``).

    ``items``: sequences, or rows of packed sequences with their ``length`` (a function; default:
    a sequence's token count)."""
    size_of = length or (lambda s: len(s.tokens))
    ordered = sorted(items, key=size_of)
    if not ordered:
        return []
    if max_tokens > 0:
        chunks: list[list[T]] = [[]]
        for s in ordered:
            cur = chunks[-1]
            longest = max([size_of(x) for x in cur] + [size_of(s)])
            if cur and longest * (len(cur) + 1) > max_tokens:
                chunks.append([s])
            else:
                cur.append(s)
        return chunks
    k = max(1, min(num_micro_batches, len(ordered)))
    size = -(-len(ordered) // k)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


@dataclass
class MicroBatch:
    input_ids: torch.Tensor  # [B, T]
    attention_mask: torch.Tensor  # [B, T]
    targets: torch.Tensor  # [B, T]
    mask: torch.Tensor  # [B, T] float, 1 where the target token is trained
    advantages: torch.Tensor  # [B, T]
    inf_logprobs: Optional[torch.Tensor]  # [B, T]; None when no sequence carries them
    ref_logprobs: Optional[torch.Tensor]  # [B, T]; None when no sequence carries them
    distill_ids: Optional[torch.Tensor]  # [B, T, K]
    distill_logprobs: Optional[torch.Tensor]
    inv_temperature: Optional[torch.Tensor] = None  # [B, T] 1 / temperature; None = all 1
    # [B] bool: which rows of inf_logprobs / ref_logprobs hold the sequence's own values (the others
    # are zeros: that sequence sent none); None when the tensor is None
    inf_present: Optional[torch.Tensor] = None
    ref_present: Optional[torch.Tensor] = None
    # the same sequences packed with their shared prefixes (prefix_packing.py); None = plain rows
    packed: Optional[PackedLayout] = None

    def to(self, device: torch.device) -> MicroBatch:
        def mv(t: Any) -> Any:
            return None if t is None else t.to(device, non_blocking=True)

        return MicroBatch(*(mv(getattr(self, f)) for f in self.__dataclass_fields__))


def _pad_rows(rows: list[list[Any]], width: int, fill: Any, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor([list(r) + [fill] * (width - len(r)) for r in rows], dtype=dtype)


def collate(seqs: list[Sequence], pad_id: int = 0) -> MicroBatch:
    """Right-pad a micro-batch; every tensor is over target positions 1..n-1 of each sequence."""
    width = max(len(s.tokens) for s in seqs) - 1
    width = max(width, 1)
    inputs = [s.tokens[:-1] for s in seqs]
    targets = [s.tokens[1:] for s in seqs]
    trained = [[1.0 if m else 0.0 for m in s.trained[1:]] for s in seqs]
    adv = [s.advantages[1:] for s in seqs]
    attn = [[1] * len(r) for r in inputs]

    def opt(name: str) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
        """Per-token values some sequences carry: padded rows (zeros for a sequence without them)
        and which rows are real, so one sequence without them does not change how the others train."""
        rows = [getattr(s, name) for s in seqs]
        if all(r is None for r in rows):
            return None, None
        values = _pad_rows(
            [r[1:] if r is not None else [] for r in rows], width, 0.0, torch.float32
        )
        return values, torch.tensor([r is not None for r in rows], dtype=torch.bool)

    distill_ids = distill_lps = None
    # teacher top-k rows of each sequence; one without them gets ids -1 throughout (padding: no
    # distillation term for it), so one group without teacher data does not switch the term off
    # for the whole micro-batch (``FlatBatch.distill_missing`` counts such sequences)
    teacher = [
        (s.distill_ids, s.distill_logprobs)
        if s.distill_ids is not None and s.distill_logprobs is not None
        else ([], [])
        for s in seqs
    ]
    if any(ids for ids, _ in teacher):
        k = max((len(x) for ids, _ in teacher for x in ids), default=1) or 1

        def pad_k(rows: list[list[Any]], fill: Any) -> list[list[Any]]:
            return [list(r) + [fill] * (k - len(r)) for r in rows] + [[fill] * k] * (
                width - len(rows)
            )

        distill_ids = torch.tensor([pad_k(ids[1:], -1) for ids, _ in teacher], dtype=torch.long)
        distill_lps = torch.tensor([pad_k(lps[1:], 0.0) for _, lps in teacher], dtype=torch.float32)
    inf_lps, inf_present = opt("inf_logprobs")
    ref_lps, ref_present = opt("ref_logprobs")
    inv_temp = None
    if any(s.temperature != 1.0 for s in seqs):
        inv_temp = torch.tensor([[1.0 / s.temperature] * width for s in seqs], dtype=torch.float32)
    return MicroBatch(
        input_ids=_pad_rows(inputs, width, pad_id, torch.long),
        attention_mask=_pad_rows(attn, width, 0, torch.long),
        targets=_pad_rows(targets, width, pad_id, torch.long),
        mask=_pad_rows(trained, width, 0.0, torch.float32),
        advantages=_pad_rows(adv, width, 0.0, torch.float32),
        inf_logprobs=inf_lps,
        ref_logprobs=ref_lps,
        distill_ids=distill_ids,
        distill_logprobs=distill_lps,
        inv_temperature=inv_temp,
        inf_present=inf_present,
        ref_present=ref_present,
    )
