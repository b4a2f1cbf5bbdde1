"""GRPO trainer for atroposlib: pulls scored groups from the trajectory API and trains the policy.

The algorithm, one optimizer step per API batch:

1. Rank 0 pulls a batch (``GET /batch``: a list of scored groups, ``batch_size`` sequences in all) and
   broadcasts it to every rank (``torchrun``; a single process needs nothing).
2. Advantages: the env's per-token ``advantages`` when the group carries them, otherwise group-relative
   scores, A_i = (s_i - mean(s)) / std(s) (``advantage_mode=mean_only``: s_i - mean(s), Dr. GRPO),
   broadcast over the sequence's trained tokens. Groups with ``reward_status="unavailable"`` (the
   grader failed, not the policy) are dropped, never trained as 0. ``--control shuffled`` permutes the
   scores inside each group first: the control run in which the reward carries no signal.
3. Loss (``losses/``, one module per loss): decoupled PPO by default (``clip_reference=proximal``): the
   clipped ratio r = pi_theta / pi_prox against the weights the step starts from (one optimizer step
   per batch: r = 1, the gradient of log pi), times the importance weight min(pi_prox / mu, tis_cap)
   against the *inference* logprobs mu carried in the batch (the policy that sampled, a step or two
   stale, with the engine's numerics); ``clip_reference=behaviour``: r = pi_theta / mu itself, PPO
   clipping with asymmetric bounds [1 - eps_low, 1 + eps_high] (clip-higher) and truncated importance
   sampling (the unclipped branch's weight is capped at ``tis_cap``); token-level aggregation over the
   whole batch.
   Variants: GSPO (sequence-level ratio), CISPO (clipped, detached IS weight). Optional k3 KL to a
   reference model (off by default) and a top-k distillation term when the batch carries a teacher's
   ``distill_token_ids/distill_logprobs``.
   The KL and distillation terms take the policy term's per-token weights, so all three are aggregated
   alike (token, sequence or constant). Logits are divided by the sampling temperature when the server
   reports logprobs at it (``--temperature``, or each group's ``generation_params``).
4. Forward/backward (``train_step.py``) over length-sorted micro-batches of a token budget sized from
   ``seq_len`` (each normalised by the *whole* batch's token count, so accumulation and data
   parallelism do not change the objective); log-probabilities of the sampled tokens come from the
   output embedding in chunks, never as ``[tokens, vocab]`` logits (``logprobs.py``); gradient
   checkpointing on GPU; bf16 compute over fp32 master weights and optimizer state (``precision.py``:
   autocast, or FSDP2's ``MixedPrecisionPolicy``); then grad-norm clipping, AdamW step, schedule.
5. Every ``vllm_restart_interval`` steps rank 0 publishes the weights to the inference servers
   (``weight_refresh.py``: restart | reload | lora | none); every ``checkpoint_interval`` steps it writes
   a resumable checkpoint (model, optimizer, scheduler, RNG, step); then it acknowledges the batch
   (``POST /batch/ack``: never redelivered; an unacknowledged one is, so a crash loses no batch). The
   step's metrics row (``metrics.jsonl``, wandb if enabled) is written before both. ``--resume``
   continues from the checkpoint and registers at that step; a redelivered batch whose step the checkpoint already holds is acked, not
   retrained; the first batch it trains settles its step with the API's (``resume.py``: one line
   when batches acknowledged after the checkpoint are not in the model, metrics rows kept once).
   With ``checkpoint_interval=1`` every acknowledged batch is in a checkpoint.

Set-up (``model_setup.py``): one GPU per ``torchrun`` rank (``cuda:LOCAL_RANK``), the policy loaded in
the master dtype, the frozen KL reference in the compute dtype and sharded like the policy.

Run: ``atropos-grpo --model-name DIR --api-url http://127.0.0.1:8000 ...`` (``--help`` lists every field of
``TrainingConfig``), or ``torchrun --nproc-per-node 2 -m example_trainer.grpo ...``.
"""

from __future__ import annotations

import logging
import math
import os
import random
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import torch

from atroposlib.errors import APIUnavailable, AtroposError
from atroposlib.type_definitions import Registration
from atroposlib.utils.cli import USAGE_ERROR, fail
from atroposlib.utils.progress import quiet_library_bars
from example_trainer.batching import flatten_batch
from example_trainer.checkpoint import load_latest, save_checkpoint
from example_trainer.config import TrainingConfig, parse_config
from example_trainer.distributed import (
    DistInfo,
    barrier,
    broadcast_object,
    full_model_state_dict,
    full_optimizer_state_dict,
    init_distributed,
    shutdown,
    unwrap,
    wrap_model,
)
from example_trainer.flops import ModelCost, model_cost, step_flops
from example_trainer.metrics import MetricsLogger, format_step_line, note_batch, step_metrics
from example_trainer.model_setup import (
    attention_kernel,
    check_device,
    enable_gradient_checkpointing,
    load_policy_for_training,
    load_reference,
    pin_cpu_cores,
    resolve_device,
    set_attention,
    use_gradient_checkpointing,
)
from example_trainer.precision import (
    fsdp_mp_policy,
    publish_dtype,
    resolve_precision,
    warn_if_pure,
)
from example_trainer.prefix_packing import prefix_sharing_check
from example_trainer.refresh_modes import make_weight_refresh
from example_trainer.resume import restore_training_state, settle_resume
from example_trainer.staleness import StalenessReport, weights_lag
from example_trainer.step_timing import StepTimer, device_sync
from example_trainer.train_step import train_step
from example_trainer.weight_refresh import WeightRefresh

if TYPE_CHECKING:
    from atroposlib.api.client import TrajectoryClient

log = logging.getLogger("atropos-grpo")


# ----------------------------------------------------------------------------------------------
# Setup
# ----------------------------------------------------------------------------------------------
def make_optimizer(
    model: torch.nn.Module, cfg: TrainingConfig
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over the trainable parameters with a linear warm-up schedule."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(
        params, lr=cfg.lr, betas=tuple(cfg.adam_betas), weight_decay=cfg.weight_decay
    )
    warm = cfg.warmup_steps
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0
    )
    return opt, sched


def prefix_sharing(
    model: torch.nn.Module,
    cfg: TrainingConfig,
    info: DistInfo,
    ref_model: Optional[torch.nn.Module] = None,
) -> bool:
    """Whether the steps pack sequences that share a prompt (``--prefix-sharing``): ``auto`` asks
    ``prefix_sharing_check`` of the policy and of the KL reference (it runs the same packed rows; a
    probe forward in one process, the config alone under torch.distributed, where a forward is a
    collective), and says in one line what it decided."""
    if cfg.prefix_sharing == "off":
        return False
    reason = prefix_sharing_check(model, probe=not info.enabled)
    if reason is None and ref_model is not None:
        ref_reason = prefix_sharing_check(ref_model, probe=not info.enabled)
        reason = None if ref_reason is None else f"the reference model: {ref_reason}"
    if info.is_main:
        if reason is None:
            log.info("prefix sharing: on (sequences that share a prompt run it once)")
        else:
            log.info("prefix sharing: off, %s", reason)
    return reason is None


def register(client: TrajectoryClient, cfg: TrainingConfig, step: int) -> None:
    client.register(
        Registration(
            wandb_group=cfg.wandb_group,
            wandb_project=cfg.wandb_project,
            batch_size=cfg.batch_size,
            max_token_len=cfg.seq_len,
            checkpoint_dir=str(Path(cfg.save_path).resolve()),
            save_checkpoint_interval=cfg.checkpoint_interval,
            starting_step=step,
            num_steps=cfg.training_steps,
            weights_lag=weights_lag(cfg),
        )
    )


def wait_for_batch(
    client: TrajectoryClient, cfg: TrainingConfig
) -> tuple[list[dict[str, Any]], Optional[str], Optional[int]]:
    """Poll ``GET /batch`` until a batch is ready; the API being briefly unreachable is retried."""
    deadline = time.monotonic() + cfg.batch_wait_timeout
    while True:
        try:
            resp = client.get_batch()
            if resp.batch:
                return resp.batch, resp.batch_id, resp.step
        except APIUnavailable as e:
            log.warning("trajectory API unavailable, retrying: %s", e)
        if time.monotonic() > deadline:
            raise AtroposError(
                f"no batch from {cfg.api_url} for {cfg.batch_wait_timeout:.0f}s; is an env running?"
            )
        time.sleep(cfg.batch_poll_interval)


# ----------------------------------------------------------------------------------------------
# The loop
# ----------------------------------------------------------------------------------------------
def train(cfg: TrainingConfig) -> int:
    """Run the trainer to ``cfg.training_steps``; returns the final step."""
    from atroposlib.api.client import TrajectoryClient

    device = resolve_device(cfg.device)
    check_device(device)
    info = init_distributed(device, cfg.resolved_distributed_timeout())
    if info.enabled and info.is_main:
        log.info(
            "distributed: %d ranks, collective timeout %.0f s",
            info.world_size,
            cfg.resolved_distributed_timeout(),
        )
        if cfg.resolved_distributed_timeout() < cfg.planned_wait_s():
            log.warning(
                "distributed_timeout %.0f s is shorter than the longest planned wait (%.0f s: "
                "inference start-up + batch wait + 600 s); a rank may time out while rank 0 waits",
                cfg.resolved_distributed_timeout(),
                cfg.planned_wait_s(),
            )
    pin_cpu_cores(cfg.cpu_cores)
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    random.seed(cfg.seed + info.rank)
    torch.manual_seed(cfg.seed)
    save_path = Path(cfg.save_path)
    save_path.mkdir(parents=True, exist_ok=True)

    ckpt = load_latest(save_path) if cfg.resume else None
    start_from = str(ckpt.path) if ckpt else cfg.model_name
    lora = (
        cfg.weight_refresh == "lora"
    )  # a LoRA checkpoint holds the adapter: load the base, then it
    fsdp = info.enabled and cfg.parallel == "fsdp"
    precision = resolve_precision(cfg, device, fsdp=fsdp)
    warn_if_pure(precision)
    # under FSDP (not LoRA) built on the meta device; rank 0 reads the weights, shared out below
    model, tokenizer, pending = load_policy_for_training(
        cfg.model_name if lora else start_from,
        precision.master,
        device,
        info,
        sharded=fsdp and not lora,
        probe_head=cfg.logprob_chunk_tokens > 0,
    )
    set_attention(model, attention_kernel(cfg.attn_implementation, device, precision.compute))
    checkpointing = use_gradient_checkpointing(cfg.gradient_checkpointing, device)
    if checkpointing:
        enable_gradient_checkpointing(model)
    log.info(
        "device %s, %s, gradient checkpointing %s", device, precision.describe(), checkpointing
    )
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ref_model = None
    if cfg.kl_coef > 0:
        ref_path = cfg.ref_model_name or cfg.model_name
        ref_model = load_reference(ref_path, precision, device, info, cfg.parallel)
    refresher: WeightRefresh = make_weight_refresh(cfg, publish_dtype(cfg, precision), device)
    model = refresher.prepare_model(model, resume_from=start_from if (lora and ckpt) else None)
    model.train()
    share_prefix = prefix_sharing(model, cfg, info, ref_model)
    cost = model_cost(model)  # matmul weights, for each step's FLOPs estimate
    model = wrap_model(model, info, cfg.parallel, device, mp_policy=fsdp_mp_policy(precision))
    pending.load_into(model, device)
    optimizer, scheduler = make_optimizer(model, cfg)
    step = 0
    if ckpt is not None:
        step = restore_training_state(ckpt, model, optimizer, scheduler, sharded=fsdp)
    shuffle_gen = (
        torch.Generator().manual_seed(cfg.seed + 7919 * step) if cfg.control == "shuffled" else None
    )

    # the main rank talks to the API and logs; the others have neither
    client: Optional[TrajectoryClient] = None
    metrics: Optional[MetricsLogger] = None
    if info.is_main:
        token = cfg.api_token or os.environ.get("ATROPOS_API_TOKEN")  # as every other client
        client = TrajectoryClient(cfg.api_url, token=token, timeout=120.0)
        register(client, cfg, step)
        refresher.start(
            str(Path(start_from).resolve()) if Path(start_from).exists() else start_from, step
        )
        metrics = MetricsLogger(
            save_path / "metrics.jsonl",
            use_wandb=cfg.use_wandb,
            wandb_project=cfg.wandb_project,
            wandb_group=cfg.wandb_group,
            config=cfg.model_dump(),
        )
    timer = StepTimer(sync=device_sync(device.type))  # where each step's time goes
    settling = cfg.resume  # the first batch trained after --resume settles the step (resume.py)
    staleness = StalenessReport(client, cfg) if info.is_main else None
    try:
        while step < cfg.training_steps:
            t_wait = time.perf_counter()
            batch = batch_id = batch_step = None
            with timer.phase("wait"):
                if client is not None:
                    batch, batch_id, batch_step = wait_for_batch(client, cfg)
                batch, batch_id, batch_step = broadcast_object((batch, batch_id, batch_step), info)
            if batch_step is not None and batch_step <= step:
                # redelivered after a crash between checkpoint and ack: its update is already in the
                # weights we resumed from, so acknowledge it without training it twice
                log.info(
                    "batch of step %d is already in the checkpoint (step %d); acking it",
                    batch_step,
                    step,
                )
                if client is not None:
                    client.ack_batch(batch_id)
                continue
            if settling:
                settling = False
                step = settle_resume(
                    step,
                    batch_step,
                    checkpointed=ckpt is not None,
                    interval=cfg.checkpoint_interval,
                    metrics=metrics,
                )
                if step >= cfg.training_steps:
                    break  # the API had acknowledged every step: nothing is left to train
            t0 = time.perf_counter()
            with timer.phase("prepare"):
                flat = flatten_batch(
                    batch,
                    seq_len=cfg.seq_len,
                    advantage_mode=cfg.advantage_mode,
                    shuffle_generator=shuffle_gen,
                    temperature=cfg.temperature,
                    temperature_from_groups=cfg.temperature_from_groups,
                    overlong=cfg.overlong,
                    overlong_penalty=cfg.overlong_penalty,
                )
                if info.is_main:
                    note_batch(flat, cfg.seq_len)
            with timer.phase("optimizer"):
                optimizer.zero_grad(set_to_none=True)
            stats = train_step(
                model, ref_model, flat, cfg, info, device, pad_id, timer, share_prefix
            )
            with timer.phase("optimizer"):
                grad_norm = float(
                    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                )
                if math.isfinite(grad_norm):
                    optimizer.step()
                else:
                    log.error("step %d: non-finite gradient norm; update skipped", step + 1)
                scheduler.step()
            step += 1
            step_time = time.perf_counter() - t0
            extra: dict[str, Any] = {}
            if step % cfg.vllm_restart_interval == 0 or step == cfg.training_steps:
                with timer.phase("publish"):
                    extra = publish(refresher, model, tokenizer, step, cfg, info)
            if (
                metrics is not None
            ):  # logged before the checkpoint and ack: a kill after them loses no row
                m = step_metrics(
                    step, flat, stats, grad_norm, scheduler.get_last_lr()[0], step_time, t0 - t_wait
                )
                m.update(extra)
                if staleness is not None:
                    m.update(staleness.step_metrics(step, m))
                m.update(_timing_fields(timer, cost, stats))
                metrics.log(m)
                print(format_step_line(m, cfg.training_steps), flush=True)
            if cfg.checkpoint_interval and step % cfg.checkpoint_interval == 0:
                with timer.phase("checkpoint"):
                    checkpoint(model, tokenizer, optimizer, scheduler, step, cfg, info)
            if (
                client is not None and batch_id
            ):  # after the update and its checkpoint: never redelivered
                with timer.phase("ack"):
                    client.ack_batch(batch_id)
        if not cfg.checkpoint_interval or step % cfg.checkpoint_interval:
            checkpoint(model, tokenizer, optimizer, scheduler, step, cfg, info)
        # ranks leave together: one tearing down its process group while rank 0 still writes aborts (gloo)
        barrier(info)
    finally:
        if info.is_main:
            refresher.close()
            if metrics is not None:
                metrics.close()
            if client is not None:
                client.close()
        shutdown(info)
    return step


def _timing_fields(timer: StepTimer, cost: ModelCost, stats: dict[str, float]) -> dict[str, float]:
    """The step's time breakdown (``step_timing.py``) and its estimated arithmetic (``flops.py``):
    ``train_tflop`` for forward + backward of the whole batch, ``train_tflop_per_s`` over their time."""
    row = timer.row()
    flop = step_flops(
        cost,
        stats.get("padded_tokens", 0.0),
        stats.get("padded_square_sum", 0.0),
        head_tokens=stats.get("head_tokens"),
    )
    compute_s = row["time_forward_s"] + row["time_backward_s"]
    row["train_tflop"] = flop / 1e12
    row["train_tflop_per_s"] = flop / compute_s / 1e12 if compute_s > 0 else 0.0
    return row


def _full_state_dict(
    model: torch.nn.Module, cfg: TrainingConfig, info: DistInfo
) -> Optional[dict[str, Any]]:
    """FSDP: the gathered full weights (a collective every rank joins); otherwise None."""
    return full_model_state_dict(model) if info.enabled and cfg.parallel == "fsdp" else None


def publish(
    refresher: WeightRefresh,
    model: torch.nn.Module,
    tokenizer: Any,
    step: int,
    cfg: TrainingConfig,
    info: DistInfo,
) -> dict[str, Any]:
    """Push the current weights to the inference server (rank 0 only); every rank joins the gather."""
    sd = _full_state_dict(model, cfg, info)
    return refresher.refresh(step, unwrap(model), tokenizer, state_dict=sd) if info.is_main else {}


def checkpoint(
    model: torch.nn.Module,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    step: int,
    cfg: TrainingConfig,
    info: DistInfo,
) -> None:
    # FSDP: every rank joins the gathers of the full weights and of the full optimizer state
    sd = _full_state_dict(model, cfg, info)
    optim_sd = (
        full_optimizer_state_dict(model, optimizer)
        if info.enabled and cfg.parallel == "fsdp"
        else None
    )
    if info.is_main:
        save_checkpoint(
            Path(cfg.save_path),
            step,
            model=unwrap(model),
            tokenizer=tokenizer,
            optimizer=optimizer,
            scheduler=scheduler,
            extra={"config": cfg.model_dump()},
            keep=cfg.keep_checkpoints,
            state_dict=sd,
            optimizer_state=optim_sd,
        )


def main(argv: Optional[Sequence[str]] = None) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    quiet_library_bars()  # a log file gets no "Loading weights" bar
    # SIGTERM unwinds like Ctrl-C, so `finally` stops an inference server the trainer launched
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        cfg = parse_config(argv)
    except AtroposError as e:  # a bad flag value or config file: nothing was started
        return fail("atropos-grpo", e, USAGE_ERROR)
    try:
        train(cfg)
    except AtroposError as e:
        return fail("atropos-grpo", e, 1)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
