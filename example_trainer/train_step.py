"""One optimizer step's forward/backward: micro-batches, log-probabilities, losses, gradient sums.

For each length-sorted micro-batch of this rank's share of the batch (a padded-token budget sized from
``seq_len`` by default, see ``TrainingConfig.resolved_micro_batch_tokens``):

1. forward under the precision recipe (``precision.py``: bf16 autocast over fp32 weights, FSDP2's
   mixed-precision policy, or plain fp32), the model's output embedding swapped for the chunked
   sampled-token head (``logprobs.py``), so no ``[tokens, vocab]`` logits exist; the logits are divided
   by each sequence's temperature (``--temperature`` or the group's ``generation_params``);
2. the policy loss (``losses/``) plus the optional k3 KL to a reference and the top-k distillation
   term, all with the same per-token weights, so each is aggregated the same way (token, sequence or
   constant). The ratio's behaviour policy is each sequence's inference logprobs; a sequence that sent
   none is on-policy (counted in ``on_policy_seqs``) without changing the others. The KL's reference is
   each sequence's ``ref_logprobs`` when the batch carries them, else the reference model's chunked
   forward (no gradient), which is skipped for micro-batches whose every sequence carries them;
3. backward of ``loss * world_size / normaliser(whole batch)`` outside autocast.

A sequence whose every trained token has advantage exactly 0 (its group's scores all equal) has a
policy gradient of exactly 0; with no KL or distillation term on, it is left out of the micro-batches
(``skip_zero_advantage``), while the normaliser still counts its tokens, so the step's gradient is the
one the full pass gives. When that leaves nothing, one zero-loss pass makes the gradients zeros rather
than none, so the optimizer steps (on its moments) as it would have.

A rank whose share of a micro-batch is empty runs a zero-loss forward/backward of one pad token (and a
reference forward when the step needs one), so every rank joins the same DDP/FSDP collectives. Under
FSDP the (sharded) reference model's forward is a collective too, so there it runs for every
micro-batch of a step in which any sequence lacks ``ref_logprobs``.

Before any forward, ``check_batch`` refuses with one line (on every rank alike, since every rank holds
the whole batch) a token or distillation id outside the model's vocabulary, and a KL term with neither
a reference model nor ``ref_logprobs``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Optional

import torch

from atroposlib.errors import ConfigError, SchemaError
from example_trainer.batching import (
    FlatBatch,
    MicroBatch,
    Sequence,
    collate,
    split_micro_batches,
)
from example_trainer.config import TrainingConfig
from example_trainer.distributed import DistInfo, all_reduce_sums
from example_trainer.logprobs import full_vocab_entropy, full_vocab_logprobs, sampled_token_head
from example_trainer.losses import (
    distill_from_logprobs,
    kl_k3,
    normaliser_for,
    policy_loss,
    sequence_weights,
)
from example_trainer.output_head import output_vocab_size
from example_trainer.precision import Precision, autocast_context, resolve_precision
from example_trainer.prefix_packing import (
    layout,
    pack_rows,
    packed_model_inputs,
    row_length,
)
from example_trainer.step_timing import NullTimer, StepTimer


def _inputs(mb: MicroBatch) -> dict[str, torch.Tensor | bool]:
    # no KV cache: it would hold every layer's keys and values alive through the backward
    return {"input_ids": mb.input_ids, "attention_mask": mb.attention_mask, "use_cache": False}


def forward_logprobs(
    model: torch.nn.Module, mb: MicroBatch, ids: torch.Tensor, chunk_tokens: int
) -> torch.Tensor:
    """``[B, T, K]`` fp32 log-probabilities of ``ids`` (chunked head when ``chunk_tokens`` > 0 and the
    model allows it, else the full-vocabulary path). The chunked head runs only at the trained
    positions (``mb.mask``): every loss term and statistic reads the log-probabilities through that
    mask, so the prompt's and the padding's are never computed (0 there). With ``mb.packed`` the
    forward runs over the packed rows and the result is mapped back to the sequences' layout."""
    return forward_logprobs_entropy(model, mb, ids, chunk_tokens, entropy=False)[0]


def forward_logprobs_entropy(
    model: torch.nn.Module,
    mb: MicroBatch,
    ids: torch.Tensor,
    chunk_tokens: int,
    entropy: bool = True,
) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """``forward_logprobs`` and, with ``entropy``, the ``[B, T]`` entropy (no gradient) of the policy's
    tempered distribution at the trained positions (0 elsewhere); None without ``entropy``."""
    packed = mb.packed
    if packed is not None:
        inputs = packed_model_inputs(model, packed)
        run_ids = packed.scatter(ids)
        inv_temp = None if mb.inv_temperature is None else packed.scatter(mb.inv_temperature, 1.0)
        trained = packed.scatter(mb.mask > 0, False)
    else:
        inputs, run_ids, inv_temp, trained = _inputs(mb), ids, mb.inv_temperature, mb.mask > 0

    def unpack(x: torch.Tensor) -> torch.Tensor:
        return x if packed is None else packed.gather(x)

    if chunk_tokens > 0:
        with sampled_token_head(model, run_ids, inv_temp, chunk_tokens, trained, entropy) as head:
            if head is not None:
                lp = unpack(head.result(model(**inputs).logits))
                return lp, None if head.entropy is None else unpack(head.entropy)
    logits = model(**inputs).logits
    lp = unpack(full_vocab_logprobs(logits, run_ids, inv_temp))
    if not entropy:
        return lp, None
    # at the trained positions only: a [tokens, vocab] copy of every position's would double the
    # plain path's peak
    at = torch.zeros(trained.shape, dtype=torch.float32, device=logits.device)
    at[trained] = full_vocab_entropy(
        logits[trained], None if inv_temp is None else inv_temp[trained]
    )
    return lp, unpack(at)


def _reference_logprobs(
    ref_model: torch.nn.Module, mb: MicroBatch, chunk_tokens: int
) -> torch.Tensor:
    with torch.no_grad():
        out = forward_logprobs(ref_model, mb, mb.targets.unsqueeze(-1), chunk_tokens)[..., 0]
    if hasattr(ref_model, "reshard"):  # FSDP2 keeps a root's gathered weights until a backward
        ref_model.reshard()
    return out


def check_batch(
    flat: FlatBatch, cfg: TrainingConfig, vocab_size: Optional[int], has_ref_model: bool
) -> None:
    """Refuse what would otherwise crash inside a forward or gather, naming the bad value."""
    for i, s in enumerate(flat.sequences):
        if vocab_size is not None and s.tokens and max(s.tokens) >= vocab_size:
            pos = next(t for t, tok in enumerate(s.tokens) if tok >= vocab_size)
            raise SchemaError(
                f"sequence {i}: token id {s.tokens[pos]} at position {pos} is outside the model's "
                f"vocabulary (size {vocab_size})"
            )
        if cfg.distill_coef > 0 and vocab_size is not None and s.distill_ids is not None:
            for t, row in enumerate(s.distill_ids):
                bad = [d for d in row if d >= vocab_size]
                if bad:
                    raise SchemaError(
                        f"sequence {i}: distill_token_ids id {bad[0]} at position {t} is outside the "
                        f"model's vocabulary (size {vocab_size})"
                    )
        if cfg.kl_coef > 0 and not has_ref_model and s.ref_logprobs is None:
            raise ConfigError(
                f"kl_coef {cfg.kl_coef:g}: sequence {i} carries no ref_logprobs and no reference model "
                "is loaded; send ref_logprobs with every group or train with a reference model"
            )


def _dummy_pass(
    model: torch.nn.Module,
    ref_model: Optional[torch.nn.Module],
    device: torch.device,
    pad_id: int,
    autocast: contextlib.AbstractContextManager,
) -> None:
    # the collectives in the order of a real micro-batch: policy forward, reference forward, backward
    dummy = torch.full((1, 1), pad_id, dtype=torch.long, device=device)
    with autocast:
        zero = model(input_ids=dummy, use_cache=False).logits.float().sum() * 0.0
        if ref_model is not None:
            with torch.no_grad():
                ref_model(input_ids=dummy, use_cache=False)
            if hasattr(ref_model, "reshard"):
                ref_model.reshard()
    zero.backward()


# the statistics a step sums over its micro-batches (then over ranks; ratio_max / ratio_min are the
# extremes), in the order every rank reduces them; metrics.step_metrics turns them into the row
_STEP_SUMS = ("loss", "kl", "distill", "tokens", "clipped", "capped", "ratio_sum", "abs_delta_sum")
# those of them the policy loss reports per micro-batch (``losses.policy_loss``'s stats)
_POLICY_SUMS = (
    "tokens",
    "clipped",
    "capped",
    "ratio_sum",
    "abs_delta_sum",
    "mismatch_kl_sum",
    "on_policy_seqs",
    "entropy_sum",
)


def _zero_stats() -> dict[str, float]:
    stats: dict[str, float] = dict.fromkeys(_STEP_SUMS, 0.0)
    stats.update(
        mismatch_kl_sum=0.0,
        entropy_sum=0.0,  # the policy's entropy summed over trained tokens (mask-weighted)
        ratio_max=0.0,
        ratio_min=float("inf"),
        seq_tokens=0.0,
        on_policy_seqs=0.0,
        padded_tokens=0.0,  # rows x padded length: what the forward computes (step_flops)
        padded_square_sum=0.0,
        head_tokens=0.0,  # positions the output head ran at
    )
    return stats


@dataclass
class _StepContext:
    """What every micro-batch of one step shares."""

    model: torch.nn.Module
    ref_model: Optional[torch.nn.Module]
    cfg: TrainingConfig
    info: DistInfo
    device: torch.device
    pad_id: int
    timer: StepTimer
    share_prefix: bool
    precision: Precision
    norm: float  # the whole batch's normaliser (losses.normaliser_for)
    ref_step: bool  # some sequence lacks ref_logprobs: the reference model's forward runs
    lockstep: bool  # FSDP: the sharded reference's forward is a collective every rank joins


@dataclass
class _MicroBatchResult:
    mb: MicroBatch
    loss: torch.Tensor  # summed over the micro-batch, before the normaliser
    policy_stats: dict[str, float]
    kl: float
    distill: float


def train_step(
    model: torch.nn.Module,
    ref_model: Optional[torch.nn.Module],
    flat: FlatBatch,
    cfg: TrainingConfig,
    info: DistInfo,
    device: torch.device,
    pad_id: int,
    timer: Optional[StepTimer] = None,
    share_prefix: bool = False,
) -> dict[str, float]:
    """Forward/backward over every micro-batch of this rank's shard; returns summed statistics.

    ``timer`` (``step_timing.py``) gets the collate, forward and backward phases of each micro-batch.
    ``share_prefix``: the sequences sharing a prompt run it once, in packed rows (``prefix_packing.py``;
    the trainer decides at set-up whether the model allows it)."""
    precision = resolve_precision(cfg, device, fsdp=info.enabled and cfg.parallel == "fsdp")
    seqs = flat.sequences
    n_tokens = float(sum(sum(s.trained[1:]) for s in seqs))
    norm = normaliser_for(cfg.aggregation, n_tokens, len(seqs), cfg.seq_len)
    check_batch(flat, cfg, output_vocab_size(model), ref_model is not None)
    # a reference forward is needed only for sequences without ref_logprobs; a sharded (FSDP)
    # reference runs in lock-step on every rank, so there the whole step decides
    ref_step = (
        cfg.kl_coef > 0 and ref_model is not None and any(s.ref_logprobs is None for s in seqs)
    )
    step = _StepContext(
        model,
        ref_model,
        cfg,
        info,
        device,
        pad_id,
        timer if timer is not None else NullTimer(),
        share_prefix,
        precision,
        norm,
        ref_step,
        lockstep=info.enabled and cfg.parallel == "fsdp",
    )
    computed = [s for s in seqs if not _zero_gradient(s)] if _policy_term_only(flat, cfg) else seqs
    micro = _global_micro_batches(computed, cfg, info, share_prefix)
    stats = _zero_stats()
    for i, global_mb in enumerate(micro):
        # the gradients are reduced over ranks once, at the last micro-batch
        no_sync = info.enabled and i < len(micro) - 1 and hasattr(model, "no_sync")
        with model.no_sync() if no_sync else contextlib.nullcontext():
            result = _micro_batch_pass(step, global_mb[info.rank :: info.world_size])
        if result is not None:
            _add_micro_batch_stats(stats, result, step.norm, chunked=cfg.logprob_chunk_tokens > 0)
    if not micro and seqs:
        # every sequence was skipped: zero gradients (not none), so the optimizer steps as it would
        # have after the full, zero-gradient pass (AdamW still moves on its moments)
        with step.timer.phase("forward"):
            _dummy_pass(model, None, device, pad_id, autocast_context(precision, device))
    out = all_reduce_sums(stats, info, maxima=("ratio_max",), minima=("ratio_min",))
    # every rank holds the whole batch, so these are the same everywhere (not summed over ranks)
    out["zero_advantage_seqs"] = float(len(seqs) - len(computed))
    out["zero_advantage_tokens"] = n_tokens - float(sum(sum(s.trained[1:]) for s in computed))
    return out


def _policy_term_only(flat: FlatBatch, cfg: TrainingConfig) -> bool:
    """Whether a sequence's gradient is its policy term's alone (``skip_zero_advantage`` on, no KL,
    no distillation data in the batch), so one with zero advantages contributes exactly nothing."""
    distilling = cfg.distill_coef > 0 and any(q.distill_ids is not None for q in flat.sequences)
    return cfg.skip_zero_advantage and cfg.kl_coef == 0 and not distilling


def _zero_gradient(s: Sequence) -> bool:
    """Every trained token's advantage is exactly 0: the policy term's gradient is 0 for it."""
    return all(a == 0.0 for a, m in zip(s.advantages[1:], s.trained[1:], strict=False) if m)


def _global_micro_batches(
    seqs: list[Sequence], cfg: TrainingConfig, info: DistInfo, share_prefix: bool
) -> list[list[list[Sequence]]]:
    """Rows of sequences (one each, or packed with a shared prefix) in the same global micro-batches
    on every rank (DDP needs equal counts), each to be split across the ranks."""
    budget = cfg.resolved_micro_batch_tokens()
    rows = pack_rows(seqs, budget) if share_prefix else [[s] for s in seqs]
    return split_micro_batches(
        rows,
        num_micro_batches=cfg.gradient_accumulation_steps * info.world_size,
        max_tokens=budget * info.world_size,
        length=row_length if share_prefix else (lambda row: len(row[0].tokens)),
    )


def _micro_batch_pass(
    step: _StepContext, local_rows: list[list[Sequence]]
) -> Optional[_MicroBatchResult]:
    """Forward and backward of this rank's rows of one micro-batch; None when it has none (then a
    zero-loss pass joins the other ranks' collectives)."""
    timer, device = step.timer, step.device
    local = [s for row in local_rows for s in row]
    if not local:
        ref = step.ref_model if (step.ref_step and step.lockstep) else None
        with timer.phase("forward"):
            _dummy_pass(
                step.model, ref, device, step.pad_id, autocast_context(step.precision, device)
            )
        return None
    with timer.phase("prepare"):
        mb = collate(local, pad_id=step.pad_id)
        if step.share_prefix:
            mb.packed = layout(local_rows, step.pad_id)
        mb = mb.to(device)
    needs_ref = any(s.ref_logprobs is None for s in local)
    run_ref = step.ref_step and (step.lockstep or needs_ref)
    with timer.phase("forward"), autocast_context(step.precision, device):
        loss, policy_stats, kl, distill = _micro_batch_loss(
            step.model, step.ref_model if run_ref else None, mb, step.cfg
        )
    # DDP averages gradients over ranks; multiply back so the result is sum / global normaliser
    with timer.phase("backward"):
        (loss * step.info.world_size / step.norm).backward()
    return _MicroBatchResult(mb, loss, policy_stats, kl, distill)


def _add_micro_batch_stats(
    stats: dict[str, float], result: _MicroBatchResult, norm: float, chunked: bool
) -> None:
    """Add one micro-batch's figures to the step's sums (``chunked``: the output head ran at the
    trained tokens only)."""
    mb, parts = result.mb, result.policy_stats
    stats["loss"] += float(result.loss.detach()) / norm
    stats["kl"] += result.kl / norm
    stats["distill"] += result.distill / norm
    stats["seq_tokens"] += float(mb.attention_mask.sum())
    # what the forward computed: the packed rows, or the padded ones
    n_rows, width = (mb.packed or mb).input_ids.shape
    stats["padded_tokens"] += float(n_rows * width)
    stats["padded_square_sum"] += float(n_rows * width * width)
    stats["head_tokens"] += parts["tokens"] if chunked else float(n_rows * width)
    for k in _POLICY_SUMS:
        stats[k] += parts[k]
    stats["ratio_max"] = max(stats["ratio_max"], parts["ratio_max"])
    stats["ratio_min"] = min(stats["ratio_min"], parts["ratio_min"])


def _micro_batch_loss(
    model: torch.nn.Module,
    ref_model: Optional[torch.nn.Module],
    mb: MicroBatch,
    cfg: TrainingConfig,
) -> tuple[torch.Tensor, dict[str, float], float, float]:
    """Summed loss of one micro-batch, the policy statistics, and the summed KL / distill values.

    ``ref_model``: given when the reference forward is to run (for the rows without ``ref_logprobs``)."""
    distill = cfg.distill_coef > 0 and mb.distill_ids is not None
    ids = mb.targets.unsqueeze(-1)
    if distill:
        ids = torch.cat(
            [ids, mb.distill_ids], dim=-1
        )  # one pass for the token and the teacher's top-k
    lps, entropy = forward_logprobs_entropy(model, mb, ids, cfg.logprob_chunk_tokens)
    lp = lps[..., 0]
    weights = sequence_weights(mb.mask) if cfg.aggregation == "sequence" else None
    behaviour = None  # on-policy: the ratio against the detached current policy
    on_policy = float(lp.shape[0])
    if cfg.use_inference_logprobs and mb.inf_logprobs is not None and mb.inf_present is not None:
        # per sequence: a row without inference logprobs is on-policy, the others keep theirs
        behaviour = torch.where(mb.inf_present[:, None], mb.inf_logprobs, lp.detach())
        on_policy = float((~mb.inf_present).sum())
    parts = policy_loss(
        lp,
        behaviour,
        mb.advantages,
        mb.mask,
        loss_type=cfg.loss_type,
        eps_low=cfg.eps_low,
        eps_high=cfg.eps_high,
        tis_cap=cfg.tis_cap,
        clip_reference=cfg.clip_reference,
        weights=weights,
    )
    parts.stats["on_policy_seqs"] = on_policy
    parts.stats["entropy_sum"] = 0.0 if entropy is None else float((entropy * mb.mask).sum())
    loss = parts.loss_sum
    kl_value = distill_value = 0.0
    if cfg.kl_coef > 0:
        kl = kl_k3(lp, _kl_reference(ref_model, mb, cfg.logprob_chunk_tokens), mb.mask, weights)
        loss = loss + cfg.kl_coef * kl
        kl_value = float(kl.detach())
    if distill:
        d = distill_from_logprobs(
            lps[..., 1:], mb.distill_ids, mb.distill_logprobs, mb.mask, weights
        )
        loss = loss + cfg.distill_coef * d
        distill_value = float(d.detach())
    return loss, parts.stats, kl_value, distill_value


def _kl_reference(
    ref_model: Optional[torch.nn.Module], mb: MicroBatch, chunk_tokens: int
) -> torch.Tensor:
    """The KL's reference log-probabilities: each sequence's ``ref_logprobs`` where it carries them,
    the reference model's forward for the others (``ref_model`` given when one is to run)."""
    ref = mb.ref_logprobs
    if ref_model is not None:
        computed = _reference_logprobs(ref_model, mb, chunk_tokens)
        if ref is None or mb.ref_present is None:
            return computed
        return torch.where(mb.ref_present[:, None], ref, computed)
    if ref is None or mb.ref_present is None or not bool(mb.ref_present.all()):
        # check_batch refuses this earlier
        raise ConfigError("kl_coef > 0: a micro-batch has neither ref_logprobs nor a reference")
    return ref
