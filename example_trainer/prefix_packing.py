"""Shared-prefix packing: the sequences of a group run their common prompt once per forward.

A GRPO batch holds ``group_size`` completions of each prompt; the plain layout (one padded row per
sequence) runs every prompt token ``group_size`` times, forward and backward. Packing lays the
sequences that share a prefix out in one row: the shared tokens once, then each sequence's own tokens
(its *branch*), with an attention mask in which a token sees exactly the tokens of its own sequence
that precede it, and position ids equal to each token's position in its own sequence. Every trained
token's log-probability, and so the loss and its gradient, is what the plain layout gives (up to
floating-point rounding: the matmuls have other shapes); the arithmetic shrinks with the shared
part. On the SmolLM2 chat task (a 36-token prompt, 8 replies of <= 16 tokens) a group's 8 rows of
~53 tokens become one row of ~164.

What is shared: the longest common prefix of the inputs, cut before the first position whose output
is trained (a position predicting a trained token belongs to one sequence: its target and advantage
are that sequence's). Sequences are sorted by their shareable tokens, so the longest prefix a
sequence shares with any earlier one is the one it shares with the sequence just before it; the
tokens past that prefix are appended to the row. The mask is then "both positions lie on one
sequence's path, and the key comes first", which a row can hold for any tree of prefixes.

When a sequence joins a row (``pack_rows``): it shares at least a tenth of its tokens with the row,
the row stays within ``max_row_tokens``, and the row's attention matrix (row length squared) stays
within twice the sum of its sequences' own (eager attention materialises it); else it starts a row.
A sequence sharing nothing is a row of its own: the plain layout without padding.

The model must take a custom 4D attention mask and ``position_ids`` (transformers' eager and SDPA
attention do; flash-attention kernels do not). ``prefix_sharing_check`` finds out at set-up: it runs
two sequences with a common prefix both ways on the model itself and compares the log-probabilities.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Optional

import torch

from example_trainer.packed_layout import PackedLayout

if TYPE_CHECKING:
    from example_trainer.batching import Sequence

log = logging.getLogger(__name__)

# attention kernels that take a custom [B, 1, Q, K] mask: eager adds it, SDPA takes a boolean one
MASKED_KERNELS = ("eager", "sdpa")
# a sequence joins a row only when it shares at least this share of its input tokens with it
MIN_SHARED_FRACTION = 0.1
# ... and the row's attention matrix stays within this factor of its sequences' own
ATTENTION_FACTOR = 2.0


def shareable_length(seq: Sequence) -> int:
    """How many leading input positions of ``seq`` may be shared: those before the first position
    whose output is trained (input position t predicts token t + 1)."""
    n_inputs = max(len(seq.tokens) - 1, 0)
    for t in range(1, len(seq.tokens)):
        if seq.trained[t]:
            return t - 1
    return n_inputs


def _common(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _greedy_rows(
    keyed: list[tuple[list[int], int, int]], cap: int
) -> tuple[list[list[int]], list[int]]:
    """Cut the sorted sequences (shareable tokens, input length, index) into rows in order: a sequence
    joins the row before it when it shares enough, the row stays within ``cap`` (0: none) and within
    the attention bound. Returns the rows (indices) and their lengths."""
    rows: list[list[int]] = []
    lengths: list[int] = []
    row_len = own_square = 0  # own_square: the row's sequences' input lengths squared, summed
    prev: list[int] = []
    for shareable, n, i in keyed:
        shared = _common(prev, shareable) if rows else 0
        grown = row_len + n - shared
        joins = (
            rows
            and shared > 0
            and shared >= MIN_SHARED_FRACTION * n
            and (cap <= 0 or grown <= cap)
            and grown * grown <= ATTENTION_FACTOR * (own_square + n * n)
        )
        if joins:
            rows[-1].append(i)
            row_len, own_square = grown, own_square + n * n
            lengths[-1] = grown
        else:
            rows.append([i])
            row_len, own_square = n, n * n
            lengths.append(n)
        prev = shareable
    return rows, lengths


# the row lengths tried as caps when balancing rows (at most this many, spread over the candidates)
CAP_CANDIDATES = 64


def pack_rows(sequences: list[Sequence], max_row_tokens: int = 0) -> list[list[Sequence]]:
    """The sequences grouped into rows (see the module docstring); ``max_row_tokens`` 0 = no cap.

    Rows of one step are padded to the longest, so besides sharing they should be even: the cut is
    made with the cap (a row length the uncapped cut passes through, or the longest sequence) that
    gives the fewest tokens computed, rows x longest row. A system prompt common to every group
    would otherwise pull many groups into one long row beside short ones."""
    keyed = sorted(
        (
            (s.tokens[: shareable_length(s)], max(len(s.tokens) - 1, 0), i)
            for i, s in enumerate(sequences)
        ),
        key=lambda kv: kv[0],
    )
    if not keyed:
        return []
    longest = max(n for _, n, _ in keyed)
    # every length a row of the uncapped cut reaches as it grows is a candidate cap
    reached: set[int] = {longest}
    row_len, prev = 0, None
    for shareable, n, _ in keyed:
        row_len += n - (_common(prev, shareable) if prev is not None else n)
        row_len = max(row_len, n)
        reached.add(row_len)
        prev = shareable
    caps = sorted(
        c for c in reached if c >= longest and (max_row_tokens <= 0 or c <= max_row_tokens)
    )
    if len(caps) > CAP_CANDIDATES:
        step = len(caps) / CAP_CANDIDATES
        caps = sorted({caps[int(k * step)] for k in range(CAP_CANDIDATES)} | {caps[-1]})
    best: Optional[tuple[int, list[list[int]]]] = None
    for cap in caps or [max_row_tokens]:
        rows, lengths = _greedy_rows(keyed, cap)
        cost = len(rows) * max(lengths)
        if best is None or cost < best[0]:
            best = (cost, rows)
    assert best is not None
    return [[sequences[i] for i in row] for row in best[1]]


def row_length(row: list[Sequence]) -> int:
    """Tokens of a packed row (the length ``pack_rows`` bounds)."""
    total, prev = 0, None
    for s in row:
        shareable = s.tokens[: shareable_length(s)]
        total += max(len(s.tokens) - 1, 0) - (_common(prev, shareable) if prev is not None else 0)
        prev = shareable
    return total


def layout(rows: list[list[Sequence]], pad_id: int) -> PackedLayout:
    """The packed inputs of ``rows`` (as ``pack_rows`` made them) and the map back to the plain
    layout of their sequences, in row order."""
    seqs = [s for row in rows for s in row]
    width_seq = max(max(len(s.tokens) - 1 for s in seqs), 1)
    index = torch.full((len(seqs), width_seq), -1, dtype=torch.long)
    row_tokens: list[list[int]] = []
    row_positions: list[list[int]] = []
    paths: list[list[list[int]]] = []  # per row, per sequence: its packed columns in order
    b = 0
    for row in rows:
        tokens: list[int] = []
        positions: list[int] = []
        row_paths: list[list[int]] = []
        prev_shareable: Optional[list[int]] = None
        prev_cols: list[int] = []
        for s in row:
            inputs = s.tokens[:-1]
            k = shareable_length(s)
            shareable = inputs[:k]
            shared = _common(prev_shareable, shareable) if prev_shareable is not None else 0
            cols = prev_cols[:shared]
            for depth in range(shared, len(inputs)):
                cols.append(len(tokens))
                tokens.append(inputs[depth])
                positions.append(depth)
            index[b, : len(cols)] = torch.tensor(cols, dtype=torch.long)
            row_paths.append(cols)
            prev_shareable, prev_cols = shareable, cols[:k]
            b += 1
        row_tokens.append(tokens)
        row_positions.append(positions)
        paths.append(row_paths)
    width = max(max(len(t) for t in row_tokens), 1)
    r = len(rows)
    input_ids = torch.full((r, width), pad_id, dtype=torch.long)
    position_ids = torch.zeros((r, width), dtype=torch.long)
    visible = torch.zeros((r, width, width), dtype=torch.bool)
    causal = torch.ones((width, width), dtype=torch.bool).tril()
    for i, (tokens, positions, row_paths) in enumerate(
        zip(row_tokens, row_positions, paths, strict=True)
    ):
        n = len(tokens)
        input_ids[i, :n] = torch.tensor(tokens, dtype=torch.long)
        position_ids[i, :n] = torch.tensor(positions, dtype=torch.long)
        on_path = torch.zeros((len(row_paths), width), dtype=torch.bool)
        for j, cols in enumerate(row_paths):
            on_path[j, cols] = True
        shares_a_path = (on_path.T.float() @ on_path.float()) > 0
        visible[i] = shares_a_path & causal
        visible[i].diagonal()[n:] = True  # padding sees itself: no row of the mask is empty
    offsets = torch.tensor([i * width for i, row in enumerate(rows) for _ in row])
    index = torch.where(index >= 0, index + offsets[:, None], index)
    return PackedLayout(input_ids, position_ids, visible, index, [len(t) for t in row_tokens])


def packed_model_inputs(model: torch.nn.Module, packed: PackedLayout) -> dict[str, Any]:
    """The keyword arguments of the model's forward over the packed rows."""
    kernel = attention_kernel_of(model) or "eager"
    dtype = _activation_dtype(model)
    return {
        "input_ids": packed.input_ids,
        "attention_mask": packed.attention_mask(kernel, dtype),
        "position_ids": packed.position_ids,
        "use_cache": False,
    }


def _activation_dtype(model: torch.nn.Module) -> torch.dtype:
    dev = packed_device(model)
    if torch.is_autocast_enabled(dev.type):
        return torch.float32  # eager adds the mask to bf16 scores: the sum is taken in fp32
    for p in model.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.float32


def packed_device(model: torch.nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _config(model: torch.nn.Module) -> Any:
    seen: set[int] = set()
    m: Any = model
    while m is not None and id(m) not in seen:
        seen.add(id(m))
        cfg = getattr(m, "config", None)
        if cfg is not None and hasattr(cfg, "_attn_implementation"):
            return cfg
        m = (
            getattr(m, "module", None)
            or getattr(m, "base_model", None)
            or getattr(m, "model", None)
        )
    return None


def attention_kernel_of(model: torch.nn.Module) -> Optional[str]:
    cfg = _config(model)
    return None if cfg is None else getattr(cfg, "_attn_implementation", None)


def _static_reason(model: torch.nn.Module) -> Optional[str]:
    """Why the model cannot take a packed row, from its config alone; None when it may."""
    cfg = _config(model)
    if cfg is None:
        return "the model has no transformers config"
    kernel = getattr(cfg, "_attn_implementation", None)
    if kernel not in MASKED_KERNELS:
        return f"its attention kernel {kernel!r} takes no custom mask (eager and sdpa do)"
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    layer_types = getattr(text, "layer_types", None) or []
    if any(t != "full_attention" for t in layer_types):
        return "it has layers of local or chunked attention, which a custom mask would override"
    window = getattr(text, "sliding_window", None)
    if window and getattr(text, "use_sliding_window", True) and not layer_types:
        return "it declares a sliding window, which a custom mask would override"
    return None


def prefix_sharing_check(model: torch.nn.Module, probe: bool = True) -> Optional[str]:
    """None when ``model`` gives the same log-probabilities packed as plain, else why not.

    ``probe``: also run two short sequences with a common prefix both ways (no gradient) and compare
    every position's log-probabilities; without it (under torch.distributed, where a forward is a
    collective) the config alone decides."""
    reason = _static_reason(model)
    if reason is not None or not probe:
        return reason
    from example_trainer.batching import Sequence, collate

    vocab = getattr(getattr(model, "config", None), "vocab_size", None) or 64
    hi = max(4, min(int(vocab), 200))
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(3, hi, (7,), generator=gen).tolist()
    a = prompt + torch.randint(3, hi, (4,), generator=gen).tolist()
    b = prompt + torch.randint(3, hi, (6,), generator=gen).tolist()
    seqs = [
        Sequence(
            tokens=t, trained=[i >= 7 for i in range(len(t))], advantages=[0.0] * len(t), score=0.0
        )
        for t in (a, b)
    ]
    device = packed_device(model)
    mb = collate(seqs).to(device)
    packed = layout([seqs], pad_id=0).to(device)
    training = model.training
    model.eval()  # dropout would make the two forwards differ
    try:
        with torch.no_grad():
            plain = torch.log_softmax(
                model(
                    input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False
                ).logits.float(),
                -1,
            )
            out = model(**packed_model_inputs(model, packed)).logits.float()
            shared = packed.gather(torch.log_softmax(out, -1))
    except Exception as e:  # a model that cannot run this way keeps the plain layout
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        return f"a packed forward failed ({type(e).__name__}: {first})"
    finally:
        model.train(training)
    real = mb.attention_mask.bool()
    gap = float((plain - shared).abs()[real].max())
    exact = plain.dtype == torch.float32 and _activation_dtype(model) == torch.float32
    if gap > (1e-3 if exact else 5e-2):
        return f"packed and plain log-probabilities differ by {gap:.3g} (its forward ignores the mask or the positions)"
    return None


__all__ = [
    "PackedLayout",
    "layout",
    "pack_rows",
    "packed_model_inputs",
    "prefix_sharing_check",
    "row_length",
    "shareable_length",
]
