"""The trainer's set-up, in the order it runs: the process, the models, the optimizer, the collaborators.

1. The process: one device per ``torchrun`` rank (``cuda:LOCAL_RANK``), the process group with its
   collective timeout, CPU pinning and threads, the seeds.
2. The models (``model_setup.py``, ``precision.py``): the policy loaded in the master dtype (from the
   latest checkpoint on ``--resume``; under FSDP on the meta device, rank 0 reading the weights), its
   attention kernel and gradient checkpointing, the frozen KL reference in the compute dtype and
   sharded like the policy, the weight refresh's wrapping (LoRA), whether prompts are shared
   (``--prefix-sharing``), then DDP/FSDP.
3. AdamW with a linear warm-up; on ``--resume`` the checkpoint's optimizer, scheduler, RNG and step.
4. The collaborators (``training_run.py``): on rank 0 the API client (registered at the step the run
   starts from), the weight refresh's start, the metrics file, the step timer and the staleness
   report; on the other ranks the null ones.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any, NamedTuple, Optional

import torch

from example_trainer.batch_feed import ApiBatchFeed, BatchFeed, open_client
from example_trainer.checkpoint import Checkpoint, load_latest
from example_trainer.config import TrainingConfig
from example_trainer.distributed import DistInfo, init_distributed, wrap_model
from example_trainer.flops import ModelCost, model_cost
from example_trainer.metrics import MetricsLogger
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
from example_trainer.resume import restore_training_state
from example_trainer.staleness import StalenessReport
from example_trainer.step_outputs import Checkpointer, WeightPublisher
from example_trainer.step_report import SilentReport, StepReport
from example_trainer.step_timing import StepTimer, device_sync
from example_trainer.training_run import ResumeSettling, TrainingRun
from example_trainer.weight_refresh import WeightRefresh

log = logging.getLogger("atropos-grpo")


class Models(NamedTuple):
    """What step 2 of the set-up gives the rest."""

    model: torch.nn.Module  # wrapped for DDP/FSDP, its weights loaded
    tokenizer: Any
    ref_model: Optional[torch.nn.Module]
    refresher: WeightRefresh
    share_prefix: bool
    cost: ModelCost  # matmul weights, for each step's FLOPs estimate


def set_up(cfg: TrainingConfig) -> TrainingRun:
    """Everything the loop needs, in the order of the module docstring."""
    device, info = set_up_process(cfg)
    ckpt = load_latest(Path(cfg.save_path)) if cfg.resume else None
    start_from = str(ckpt.path) if ckpt else cfg.model_name
    models = load_models(cfg, device, info, ckpt, start_from)
    model, tokenizer = models.model, models.tokenizer
    optimizer, scheduler = make_optimizer(model, cfg)
    step = 0
    if ckpt is not None:
        sharded = info.enabled and cfg.parallel == "fsdp"
        step = restore_training_state(ckpt, model, optimizer, scheduler, sharded=sharded)
    shuffle_gen = (
        torch.Generator().manual_seed(cfg.seed + 7919 * step) if cfg.control == "shuffled" else None
    )
    feed, report, timer = _talk_and_report(cfg, info, device, step, models, start_from)
    return TrainingRun(
        cfg,
        info,
        device,
        model,
        models.ref_model,
        tokenizer,
        pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
        share_prefix=models.share_prefix,
        optimizer=optimizer,
        scheduler=scheduler,
        shuffle_gen=shuffle_gen,
        timer=timer,
        feed=feed,
        report=report,
        publisher=WeightPublisher(model, tokenizer, cfg, info, timer, refresher=models.refresher),
        checkpointer=Checkpointer(
            model, tokenizer, cfg, info, timer, optimizer=optimizer, scheduler=scheduler
        ),
        # the first batch trained after --resume settles the step (resume.py)
        resume=ResumeSettling(cfg.resume, ckpt is not None, cfg.checkpoint_interval, report),
        step=step,
    )


def set_up_process(cfg: TrainingConfig) -> tuple[torch.device, DistInfo]:
    """This rank's device and process group, CPU pinning and threads, the seeds, the save folder."""
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
    Path(cfg.save_path).mkdir(parents=True, exist_ok=True)
    return device, info


def load_models(
    cfg: TrainingConfig,
    device: torch.device,
    info: DistInfo,
    ckpt: Optional[Checkpoint],
    start_from: str,
) -> Models:
    """The policy (from ``start_from``: the model, or the checkpoint resumed), its reference and the
    weight refresh that wraps it, ready to train (see the module docstring, step 2)."""
    # a LoRA checkpoint holds the adapter: load the base, then it
    lora = cfg.weight_refresh == "lora"
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
    ref_model = None
    if cfg.kl_coef > 0:
        ref_path = cfg.ref_model_name or cfg.model_name
        ref_model = load_reference(ref_path, precision, device, info, cfg.parallel)
    refresher = make_weight_refresh(cfg, publish_dtype(cfg, precision), device)
    model = refresher.prepare_model(model, resume_from=start_from if (lora and ckpt) else None)
    model.train()
    share_prefix = prefix_sharing(model, cfg, info, ref_model)
    cost = model_cost(model)
    model = wrap_model(model, info, cfg.parallel, device, mp_policy=fsdp_mp_policy(precision))
    pending.load_into(model, device)
    return Models(model, tokenizer, ref_model, refresher, share_prefix, cost)


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


def _talk_and_report(
    cfg: TrainingConfig,
    info: DistInfo,
    device: torch.device,
    step: int,
    models: Models,
    start_from: str,
) -> tuple[BatchFeed, SilentReport, StepTimer]:
    """Rank 0: the API client (registered at ``step``), the weight refresh started from
    ``start_from``, the metrics file, then the step timer (the first row counts from here) and the
    staleness report. The other ranks: the timer, and null feed and report."""
    if not info.is_main:  # the main rank talks to the API and logs; the others have neither
        return BatchFeed(info), SilentReport(), StepTimer(sync=device_sync(device.type))
    client = open_client(cfg, step)
    path = Path(start_from)
    models.refresher.start(str(path.resolve()) if path.exists() else start_from, step)
    metrics = MetricsLogger(
        Path(cfg.save_path) / "metrics.jsonl",
        use_wandb=cfg.use_wandb,
        wandb_project=cfg.wandb_project,
        wandb_group=cfg.wandb_group,
        config=cfg.model_dump(),
    )
    timer = StepTimer(sync=device_sync(device.type))  # where each step's time goes
    staleness = StalenessReport(client, cfg)
    report = StepReport(metrics, staleness, timer, models.cost, cfg.training_steps, cfg.seq_len)
    return ApiBatchFeed(client, cfg, info, timer), report, timer
