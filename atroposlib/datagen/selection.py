"""Which sequences of a scored group become SFT examples or DPO pairs (pure functions).

Same rules and output records as Atropos's ``atropos-sft-gen`` / ``atropos-dpo-gen``:

* SFT: sequences sorted by score (best first); unless ``allow_negative_scores`` only scores > 0 are
  kept; with ``minimum_score_diff_max_min > 0`` a sequence must beat the group's minimum by more than
  that; the best ``save_top_n_per_group`` are kept. Records: ``{"prefix", "completion", "score"}``
  (text decoded from tokens) or ``{"messages", "score"}``.
* DPO: the best sequences (score > 0 unless ``allow_negative_scores``) are paired, each with a distinct
  rejected sequence among the group's ``save_n_pairs_per_group`` worst whose score is lower by more
  than ``minimum_score_diff_max_min``. Records: ``{"prefix", "pos", "neg", "score"}`` or
  ``{"pos": messages, "neg": messages, "score"}``; ``neg_score`` is added. Where Atropos picks the
  rejected sequence at random, we take the worst one left, so output is reproducible.

Text records split each sequence where its masks say training starts: ``prefix`` is the decoded
tokens before the first trained token, ``completion`` (``pos``/``neg``) the decoded rest, so prefix +
completion is the whole decoded sequence. Atropos splits at the longest prefix the decoded texts
share, which files the completions' common first tokens (e.g. the "1" of "12" and "15") under the
prompt; the masks record what was really trained. A DPO pair joins two sequences only when their
prefixes are the same text.

What was trained is given with the text: ``segments`` (SFT, the whole sequence) and
``pos_segments`` / ``neg_segments`` (DPO, the completions) list ``{"text", "label"}`` stretches in
order, ``label`` true where the tokens were trained, false where they were masked (the prompt, a
tool's output between two assistant turns). Their texts join to the record's text; this is Axolotl's
``input_output`` format. The texts are cut with ``report.spans``: never inside a character, so no
U+FFFD appears that the decoded sequence does not hold.

Every sequence that is not kept is counted under the rule that dropped it (``Selection.rejected``).

Message-format records keep only the roles a chat template understands (``CHAT_TEMPLATE_ROLES``:
system, user, assistant, tool; ``keep_roles`` / ``--keep-roles`` changes the set). Envs add notes such
as ``{"role": "grader", ...}`` to a group's messages for viewers; those must not become training data.
Each message left out of a written record is counted by its role (``Selection.roles_dropped``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Optional

from pydantic import BaseModel, Field, field_validator

from atroposlib.report.spans import TextSpan, decoded_spans, prompt_and_completion
from atroposlib.type_definitions import first_trained

Decoder = Callable[[list[int]], str]

# Names of the rules, as they appear in the summaries.
RULE_NON_POSITIVE = "score <= 0 (see --allow-negative-scores)"
RULE_MIN_DIFF = "score not above group min by --minimum-score-diff-max-min"
RULE_TOP_N = "beyond --save-top-n-per-group"
RULE_TOO_LONG = "longer than --max-token-len"
RULE_NO_MESSAGES = "group has no messages (--save-messages)"
RULE_NO_TOKENS = "group has no tokens to decode"
RULE_NO_MASKS = "group has no masks to split prompt from completion"
RULE_NOTHING_TRAINED = "no trained token (every mask is ignored)"
RULE_UNAVAILABLE = "reward unavailable (infrastructure failure)"
RULE_NO_PAIR = "no partner lower by more than --minimum-score-diff-max-min"
RULE_PAIR_LIMIT = "beyond --save-n-pairs-per-group"
RULE_TARGET_REACHED = "not needed: --num-seqs-to-save reached"

# Roles a chat template renders; other roles (e.g. an env's "grader" notes) are left out of message records.
CHAT_TEMPLATE_ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
_KEEP_ROLES_HELP = (
    "Message roles written to message records; messages with any other role are left out."
)
_MIN_DIFF_HELP = (
    "SFT: score must exceed the group min by more than this; DPO: chosen minus rejected."
)


def _check_roles(v: tuple[str, ...]) -> tuple[str, ...]:
    roles = tuple(r.strip() for r in v)
    if not roles or any(not r for r in roles):
        raise ValueError("keep_roles must name at least one role, and no empty role")
    return roles


class _CommonOptions(BaseModel):
    """Settings both generators share: the length cap, the output format, the score rules and which
    roles reach the output."""

    max_token_len: Optional[int] = Field(
        None, gt=0, description="Drop sequences with more tokens than this."
    )
    save_messages: bool = Field(
        False, description="Save the message lists instead of decoded prefix/completion text."
    )
    allow_negative_scores: bool = Field(
        False, description="Also keep sequences whose score is <= 0."
    )
    minimum_score_diff_max_min: float = Field(0.0, ge=0.0, description=_MIN_DIFF_HELP)
    keep_roles: tuple[str, ...] = Field(CHAT_TEMPLATE_ROLES, description=_KEEP_ROLES_HELP)

    @field_validator("keep_roles")
    @classmethod
    def _roles_named(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _check_roles(v)


class SftOptions(_CommonOptions):
    """Selection settings of ``atropos-sft-gen``."""

    save_top_n_per_group: int = Field(
        3, ge=0, description="Keep at most this many best sequences per group."
    )


class DpoOptions(_CommonOptions):
    """Selection settings of ``atropos-dpo-gen``: a chosen sequence must beat its rejected one by
    more than 0.5 unless told otherwise."""

    save_n_pairs_per_group: int = Field(
        3, ge=0, description="Keep at most this many chosen/rejected pairs per group."
    )
    minimum_score_diff_max_min: float = Field(0.5, ge=0.0, description=_MIN_DIFF_HELP)


@dataclass
class Selection:
    """Records chosen from one group, and how many sequences each rule dropped."""

    records: list[dict[str, Any]] = field(default_factory=list)
    rejected: Counter = field(default_factory=Counter)
    # per record (aligned with ``records``): messages left out of it, by role
    roles_dropped: list[Counter] = field(default_factory=list)

    def add(self, record: dict[str, Any], roles_dropped: Optional[Counter] = None) -> None:
        self.records.append(record)
        self.roles_dropped.append(roles_dropped if roles_dropped is not None else Counter())


def keep_chat_roles(
    messages: Sequence[dict[str, Any]], keep_roles: Sequence[str], dropped: Counter[str]
) -> list[dict[str, Any]]:
    """The messages whose role is in ``keep_roles``; each other one is counted in ``dropped`` by role."""
    kept = []
    for m in messages:
        if m.get("role") in keep_roles:
            kept.append(m)
        else:
            dropped[str(m.get("role"))] += 1
    return kept


def find_common_prefix(texts: Sequence[str]) -> str:
    """Longest prefix shared by every string ('' for no strings)."""
    if not texts:
        return ""
    lo, hi = min(texts), max(texts)  # the common prefix of all equals that of the min and max
    n = 0
    while n < len(lo) and n < len(hi) and lo[n] == hi[n]:
        n += 1
    return lo[:n]


def split_prefix(texts: Sequence[str]) -> tuple[str, list[str]]:
    """(shared prefix, the rest of each text). Kept for callers that only have texts; the
    generators split at the masks instead (``first_trained``)."""
    prefix = find_common_prefix(texts) if len(texts) > 1 else ""
    return prefix, [t[len(prefix) :] for t in texts]


def _scores(group: dict[str, Any]) -> list[float]:
    return [float(s) for s in group.get("scores") or []]


def _length_ok(group: dict[str, Any], i: int, max_len: Optional[int]) -> bool:
    toks = group.get("tokens") or []
    return max_len is None or i >= len(toks) or len(toks[i]) <= max_len


@dataclass
class _Payloads:
    """Per sequence: the text before training starts ('' for messages), the payload (messages or
    completion text), whether the sequence has anything trained, and (text records) the
    completion's trained / untrained stretches."""

    prefixes: list[str]
    items: list[Any]
    trained: list[bool]
    segments: list[list[TextSpan]] = field(default_factory=list)


def segment_records(spans: Sequence[TextSpan]) -> list[dict[str, Any]]:
    """Stretches as ``{"text", "label"}`` records (Axolotl's ``input_output`` segments)."""
    return [{"text": sp.text, "label": sp.trained} for sp in spans if sp.text]


def has_untrained_inside(record: dict[str, Any]) -> bool:
    """Whether a text record's completion holds untrained text (e.g. a tool's output): a stretch
    labelled false after the first one labelled true."""
    for key in ("segments", "pos_segments", "neg_segments"):
        seen_trained = False
        for seg in record.get(key, []):
            if seg["label"]:
                seen_trained = True
            elif seen_trained:
                return True
    return False


def _usable(
    group: dict[str, Any], save_messages: bool, decode: Optional[Decoder], sel: Selection
) -> Optional[tuple[list[float], _Payloads]]:
    """(scores, payloads): messages, or each sequence decoded and split at its first trained
    token. None (and the group counted as rejected) when the group has no scores, an unavailable
    reward, or lacks what the format needs."""
    scores = _scores(group)
    n = len(scores)
    if not n:
        return None
    if group.get("reward_status") == "unavailable":
        sel.rejected[RULE_UNAVAILABLE] += n
        return None
    if save_messages:
        msgs = group.get("messages")
        if not msgs or len(msgs) != n:
            sel.rejected[RULE_NO_MESSAGES] += n
            return None
        return scores, _Payloads([""] * n, list(msgs), [True] * n)
    toks = group.get("tokens")
    if not toks or len(toks) != n:
        sel.rejected[RULE_NO_TOKENS] += n
        return None
    masks = group.get("masks")
    if (
        not masks
        or len(masks) != n
        or any(len(m) != len(t) for m, t in zip(masks, toks, strict=True))
    ):
        sel.rejected[RULE_NO_MASKS] += n
        return None
    if decode is None:
        raise ValueError("a tokenizer (decode function) is needed unless save_messages is set")
    out = _Payloads([], [], [])
    for t, m in zip(toks, masks, strict=True):
        prefix, rest = prompt_and_completion(decoded_spans(list(t), list(m), decode))
        out.prefixes.append(prefix)
        out.items.append("".join(sp.text for sp in rest))
        out.trained.append(first_trained(m) is not None)
        out.segments.append(rest)
    return scores, out


def _select(
    group: dict[str, Any],
    opts: _CommonOptions,
    decode: Optional[Decoder],
    rules: Callable[[Selection, dict[str, Any], list[float], _Payloads], None],
) -> Selection:
    """A ``Selection`` of ``group``: empty (the group counted) when it lacks what ``opts`` needs,
    else filled by ``rules(selection, group, scores, payloads)``."""
    sel = Selection()
    got = _usable(group, opts.save_messages, decode, sel)
    if got is not None:
        rules(sel, group, *got)
    return sel


def select_sft(
    group: dict[str, Any], opts: SftOptions, decode: Optional[Decoder] = None
) -> Selection:
    """The SFT records of one group (best first) and the count of sequences dropped per rule."""
    return _select(group, opts, decode, partial(_sft_rules, opts))


def select_dpo(
    group: dict[str, Any], opts: DpoOptions, decode: Optional[Decoder] = None
) -> Selection:
    """The DPO pairs of one group and the count of sequences left unpaired per rule."""
    return _select(group, opts, decode, partial(_dpo_rules, opts))


def _sft_rules(
    opts: SftOptions, sel: Selection, group: dict[str, Any], scores: list[float], pay: _Payloads
) -> None:
    """SFT: best first, each sequence becomes a record or is counted under the first rule it fails."""
    order = sorted(range(len(scores)), key=lambda i: scores[i], reverse=True)
    group_min = min(scores)
    for i in order:
        s = scores[i]
        if not _length_ok(group, i, opts.max_token_len):
            sel.rejected[RULE_TOO_LONG] += 1
        elif not pay.trained[i]:
            sel.rejected[RULE_NOTHING_TRAINED] += 1
        elif not opts.allow_negative_scores and s <= 0:
            sel.rejected[RULE_NON_POSITIVE] += 1
        elif opts.minimum_score_diff_max_min > 0 and not (
            s - group_min > opts.minimum_score_diff_max_min
        ):
            sel.rejected[RULE_MIN_DIFF] += 1
        elif len(sel.records) >= opts.save_top_n_per_group:
            sel.rejected[RULE_TOP_N] += 1
        elif opts.save_messages:
            dropped: Counter[str] = Counter()
            sel.add(
                {"messages": keep_chat_roles(pay.items[i], opts.keep_roles, dropped), "score": s},
                dropped,
            )
        else:
            whole = [TextSpan(pay.prefixes[i], False, 0, 0), *pay.segments[i]]
            sel.add(
                {
                    "prefix": pay.prefixes[i],
                    "completion": pay.items[i],
                    "score": s,
                    "segments": segment_records(whole),
                }
            )


def _dpo_rules(
    opts: DpoOptions, sel: Selection, group: dict[str, Any], scores: list[float], pay: _Payloads
) -> None:
    """DPO: each chosen sequence is paired with the worst unused partner that the rules allow."""
    usable = []
    for i in range(len(scores)):
        if not _length_ok(group, i, opts.max_token_len):
            sel.rejected[RULE_TOO_LONG] += 1
        elif not pay.trained[i]:
            sel.rejected[RULE_NOTHING_TRAINED] += 1
        else:
            usable.append(i)
    best_first = sorted(usable, key=lambda i: scores[i], reverse=True)
    worst_first = sorted(usable, key=lambda i: scores[i])
    pool = worst_first[: opts.save_n_pairs_per_group]
    chosen = [i for i in best_first if opts.allow_negative_scores or scores[i] > 0]
    used: set[int] = set()
    for i in chosen:
        if i in used:  # already serves as the rejected side of a pair
            continue
        if len(sel.records) >= opts.save_n_pairs_per_group:
            sel.rejected[RULE_PAIR_LIMIT] += 1
            used.add(i)
            continue
        partner = next(
            (
                j
                for j in pool
                if j not in used
                and j != i
                and pay.prefixes[j] == pay.prefixes[i]
                and scores[j] < scores[i] - opts.minimum_score_diff_max_min
            ),
            None,
        )
        if partner is None:
            sel.rejected[RULE_NO_PAIR] += 1
            used.add(i)
            continue
        used.update((i, partner))
        dropped: Counter[str] = Counter()
        if opts.save_messages:
            rec = {
                "pos": keep_chat_roles(pay.items[i], opts.keep_roles, dropped),
                "neg": keep_chat_roles(pay.items[partner], opts.keep_roles, dropped),
                "score": scores[i],
            }
        else:
            rec = {
                "prefix": pay.prefixes[i],
                "pos": pay.items[i],
                "neg": pay.items[partner],
                "score": scores[i],
            }
        rec["neg_score"] = scores[partner]
        if not opts.save_messages:
            rec["pos_segments"] = segment_records(pay.segments[i])
            rec["neg_segments"] = segment_records(pay.segments[partner])
        sel.add(rec, dropped)
    left = [i for i in usable if i not in used]
    for i in left:
        if len(sel.records) >= opts.save_n_pairs_per_group:
            sel.rejected[RULE_PAIR_LIMIT] += 1
        elif not opts.allow_negative_scores and scores[i] <= 0 and i not in chosen:
            sel.rejected[RULE_NON_POSITIVE] += 1
        else:
            sel.rejected[RULE_NO_PAIR] += 1


__all__ = [
    "CHAT_TEMPLATE_ROLES",
    "DpoOptions",
    "RULE_MIN_DIFF",
    "RULE_NON_POSITIVE",
    "RULE_NOTHING_TRAINED",
    "RULE_NO_MASKS",
    "RULE_NO_MESSAGES",
    "RULE_NO_PAIR",
    "RULE_NO_TOKENS",
    "RULE_PAIR_LIMIT",
    "RULE_TARGET_REACHED",
    "RULE_TOO_LONG",
    "RULE_TOP_N",
    "RULE_UNAVAILABLE",
    "Selection",
    "SftOptions",
    "find_common_prefix",
    "first_trained",
    "has_untrained_inside",
    "keep_chat_roles",
    "select_dpo",
    "segment_records",
    "select_sft",
    "split_prefix",
]
