"""The trainer's one typed config, and the command line generated from it.

``TrainingConfig`` lists every knob once (Atropos's field names where they exist). ``build_parser``
turns its fields into ``--kebab-case`` flags (``atroposlib.utils.settings_cli``, the helper run-api
and atropos-serve-model use too; help text = the field's description and default);
``parse_config`` applies defaults < YAML file (``--config``) < flags and validates with pydantic, so a
bad value raises ``ConfigError`` naming the field (URLs: ``atroposlib.utils.urls``'s rule). Unknown
flags are refused by argparse, in one line.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from atroposlib.errors import ConfigError
from atroposlib.inference.config import API_KEY_ENV as ENGINE_API_KEY_ENV
from atroposlib.inference_clients.registry import refreshable_server_types
from atroposlib.utils.cli import CliParser
from atroposlib.utils.settings_cli import (
    add_model_arguments,
    format_validation_error,
    model_values,
)
from atroposlib.utils.urls import check_base_url
from atroposlib.utils.yaml_config import load_yaml_mapping
from example_trainer.losses.registry import OBJECTIVES

Aggregation = Literal["token", "sequence", "constant"]
AdvantageMode = Literal["grpo", "mean_only"]
RefreshMode = Literal["restart", "reload", "lora", "nccl", "none"]
ControlMode = Literal["none", "shuffled"]
OverlongMode = Literal["keep", "mask", "penalize"]
# time budgeted, beyond the configured timeouts, for saving weights, an API call and stopping a server
WAIT_MARGIN_S = 600.0


def _one_of(value: str, known: list[str]) -> str:
    """``value`` when it is one of ``known`` (a registry's names, read when the field is validated)."""
    if value not in known:
        raise ValueError(f"must be one of {', '.join(known)}, not {value!r}")
    return value


class TrainingConfig(BaseModel):
    """Everything the GRPO trainer needs; see docs/training.md for how the pieces fit."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # --- model and optimisation -------------------------------------------------------------
    model_name: str = Field(description="HF model id or local model folder to train.")
    lr: float = Field(1e-5, gt=0, description="AdamW learning rate.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    adam_betas: list[float] = Field([0.9, 0.99], description="AdamW betas (two numbers).")
    warmup_steps: int = Field(0, ge=0, description="Linear learning-rate warm-up steps.")
    max_grad_norm: float = Field(
        1.0, gt=0, description="Gradient clipping threshold (global L2 norm)."
    )
    training_steps: int = Field(
        10, gt=0, description="Optimizer steps to run (one batch per step)."
    )
    batch_size: int = Field(
        32, gt=0, description="Sequences per batch (registered with the API, which packs batches)."
    )
    seq_len: int = Field(
        2048, gt=1, description="Longest sequence accepted; longer ones are truncated."
    )
    gradient_accumulation_steps: int = Field(
        1, gt=0, description="Micro-batches per optimizer step (the batch is split into this many)."
    )
    micro_batch_tokens: Optional[int] = Field(
        None,
        ge=0,
        description="Split the batch into length-sorted micro-batches of at most this many padded "
        "tokens (overrides gradient_accumulation_steps); 0 = off; unset = sized from seq_len "
        "(seq_len x max(1, 16384 // seq_len)) unless gradient_accumulation_steps > 1.",
    )
    device: str = Field(
        "auto", description="'cpu', 'cuda', 'cuda:N' or 'auto' (cuda when available)."
    )
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="Compute dtype: bfloat16 = bf16 autocast / FSDP mixed precision over fp32 master "
        "weights and optimizer state; auto = bfloat16 on a GPU that supports it, else float32.",
    )
    attn_implementation: str = Field(
        "auto",
        min_length=1,
        description="The attention kernel of the trainer's forward (a transformers attn_implementation: "
        "eager, sdpa, ...); auto = eager on a CPU computing in bfloat16 (PyTorch's CPU SDPA backward is "
        "several times slower in bf16 than eager's matmuls, measured on SmolLM2), else the model's own.",
    )
    torch_threads: int = Field(
        0, ge=0, description="torch.set_num_threads on CPU (0 = torch default)."
    )
    cpu_cores: list[int] = Field(
        [],
        description="Pin the trainer process to these CPU cores (e.g. leave the others to an "
        "inference server on the same machine); empty = no pinning.",
    )
    seed: int = Field(0, description="Seed for torch, Python and NumPy RNGs.")

    # --- loss ------------------------------------------------------------------------------
    loss_type: str = Field(
        "grpo",
        description="The policy loss, one of example_trainer/losses/registry.py: grpo (token ratio, "
        "clipped), gspo (sequence ratio) or cispo (clipped IS weight).",
    )
    aggregation: Aggregation = Field(
        "token",
        description="token: mean over all trained tokens; sequence: mean per sequence then over "
        "sequences; constant: sum / (sequences x seq_len) (Dr. GRPO).",
    )
    skip_zero_advantage: bool = Field(
        True,
        description="Leave out of the forward/backward the sequences whose every trained token has "
        "advantage exactly 0 (a group whose scores are all equal), when no KL or distillation term is "
        "on: their policy gradient is exactly zero, so the step's gradient is the same and only the "
        "compute is saved. The loss's normaliser still counts their tokens (trained_tokens does too); "
        "the per-token means (ratio, mismatch, entropy, clip fractions) are over the tokens computed. "
        "Counted per step (zero_advantage_sequences).",
    )
    advantage_mode: AdvantageMode = Field(
        "grpo",
        description="When the env sends no advantages: grpo = (score - group mean) / group std; "
        "mean_only = score - group mean (Dr. GRPO).",
    )
    eps_low: float = Field(0.2, ge=0, description="Lower clip: ratio >= 1 - eps_low.")
    eps_high: float = Field(
        0.28, ge=0, description="Upper clip: ratio <= 1 + eps_high (clip-higher)."
    )
    tis_cap: float = Field(
        2.0,
        ge=0,
        description="Truncated importance sampling: cap on the train/inference ratio weight (0 = off); "
        "grpo and gspo (cispo clips its weight with eps_low/eps_high instead, and refuses it).",
    )
    clip_reference: Literal["proximal", "behaviour"] = Field(
        "proximal",
        description="What the clipped ratio is taken against. proximal (decoupled PPO, as TRL's "
        "GRPOTrainer with vLLM and AReaL): the trainer's weights at the start of the step, so with one "
        "optimizer step per batch the clip bounds nothing, and a separate importance weight "
        "min(pi / mu, tis_cap) corrects for the sampler's staleness and numerics; behaviour: the "
        "sampler's logprobs mu, so tokens a stale sample's policy has already moved past the clip "
        "get no gradient. cispo's weight is its own clip against mu either way.",
    )
    use_inference_logprobs: bool = Field(
        True,
        description="Take the ratio against the inference logprobs carried in the batch (else on-policy).",
    )
    kl_coef: float = Field(
        0.0, ge=0, description="Weight of the k3 KL to a reference policy (0 = off)."
    )
    ref_model_name: Optional[str] = Field(
        None, description="Reference model for the KL term (default: a frozen copy of model_name)."
    )
    distill_coef: float = Field(
        0.0,
        ge=0,
        description="Weight of the top-k distillation term when batches carry distill_token_ids/logprobs.",
    )
    overlong: OverlongMode = Field(
        "mask",
        description="Sequences whose last reply was cut at max_tokens (the groups' overlong flags): "
        "mask leaves them out of the loss while they still count in their group's baseline "
        "(DAPO's overlong filtering); keep trains them like finished ones; penalize takes "
        "overlong_penalty off their reward before advantages. Counted per step "
        "(overlong_sequences, overlong_masked, overlong_penalized).",
    )
    overlong_penalty: float = Field(
        1.0, ge=0, description="penalize mode: reward taken off an overlong sequence."
    )
    control: ControlMode = Field(
        "none",
        description="Control experiment: 'shuffled' permutes scores within each group before "
        "computing advantages (the reward then carries no signal).",
    )

    # --- API ------------------------------------------------------------------------------
    api_url: Annotated[str, AfterValidator(check_base_url)] = Field(
        "http://localhost:8000", description="Trajectory API base URL."
    )
    api_token: Optional[str] = Field(
        None, description="Bearer token for the trajectory API (default: $ATROPOS_API_TOKEN)."
    )
    wandb_project: str = Field("atropos-grpo", description="wandb project (when use_wandb).")
    wandb_group: str = Field("", description="wandb group (sent to envs through the API).")
    use_wandb: bool = Field(False, description="Log to wandb as well as to metrics.jsonl.")
    batch_poll_interval: float = Field(0.05, gt=0, description="Seconds between /batch polls.")
    summary_interval: int = Field(
        10,
        ge=0,
        description="Every N steps, one log line on staleness: policy lag (mean, max) and the groups "
        "the API dropped for age (0 = never).",
    )
    batch_wait_timeout: float = Field(
        600.0, gt=0, description="Give up if no batch arrives for this many seconds."
    )

    # --- checkpoints and weight refresh -----------------------------------------------------
    save_path: str = Field(
        "trained_model_checkpoints", description="Folder for checkpoints and metrics."
    )
    checkpoint_interval: int = Field(
        0, ge=0, description="Save a resumable checkpoint every N steps (0 = only at the end)."
    )
    keep_checkpoints: int = Field(2, ge=1, description="Resumable checkpoints kept on disk.")
    resume: bool = Field(False, description="Continue from the latest checkpoint in save_path.")
    weight_refresh: RefreshMode = Field(
        "restart",
        description="How inference servers get new weights: restart (relaunch the server process), "
        "reload (load in place: /update_weights_from_disk on our engine and SGLang, dev-mode routes on "
        "vLLM), lora (hot-load a peft adapter), nccl (broadcast to vLLM's workers through its "
        "weight-transfer API, no disk), none.",
    )
    publish_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="dtype of the weights published to inference servers (restart and reload "
        "folders, nccl transfers): auto = the compute dtype (bfloat16 when training in bf16 over "
        "fp32 masters: half the bytes, and the values the trainer computes with); float32 for a "
        "server that must get the fp32 masters. Checkpoints always keep the masters.",
    )
    vllm_restart_interval: int = Field(
        3, gt=0, description="Refresh the inference weights every N steps (all refresh modes)."
    )
    async_refresh: bool = Field(
        True,
        description="reload mode: send the reload requests in the background while the next step trains "
        "(the save itself is synchronous).",
    )
    async_lora_load: bool = Field(
        False,
        description="lora mode: the servers load the saved adapter in the background while the next "
        "step trains (at most one load in flight; a failed one fails the next refresh). Off by "
        "default: it adds a step of policy lag, and on 2 CPU cores it did not shorten the step "
        "(docs/training.md).",
    )
    vllm_port: int = Field(9001, gt=0, lt=65536, description="Port of the inference server.")
    inference_urls: list[Annotated[str, AfterValidator(check_base_url)]] = Field(
        [], description="Inference server base URLs (default: http://127.0.0.1:<vllm_port>)."
    )
    inference_api_key: Optional[str] = Field(
        default_factory=lambda: os.environ.get(ENGINE_API_KEY_ENV) or None,
        description="Bearer key sent with every request the trainer makes to the inference servers "
        "(weight reloads, LoRA loads, probes): our engine's or vLLM's --api-key. Default: "
        "$ATROPOS_ENGINE_API_KEY (prefer it: a flag shows in ps).",
    )
    inference_command: Optional[str] = Field(
        None,
        description="restart mode: command launching the server, with {model_path} and {port} "
        "placeholders (default: vLLM's OpenAI server).",
    )
    inference_startup_timeout: float = Field(
        300.0,
        gt=0,
        description="Seconds to wait for a (re)started inference server to answer /health.",
    )
    transfer_backend: Literal["nccl", "atropos_gloo"] = Field(
        "nccl",
        description="nccl mode: the servers' --weight-transfer-config backend. nccl: vLLM's own, on "
        "GPUs (the trainer and the servers on different GPUs: NCCL refuses two ranks on one); "
        "atropos_gloo: atroposlib's, for vLLM's CPU build (its worker extension registers it).",
    )
    transfer_master_address: str = Field(
        "127.0.0.1",
        description="nccl mode with atropos_gloo: the address of this trainer that the servers' "
        "workers connect to (the group's TCP store); NCCL finds its own.",
    )
    transfer_timeout_s: float = Field(
        120.0,
        gt=0,
        description="nccl mode: the longest any step of a transfer may take (an HTTP call, the "
        "workers joining, one tensor's broadcast) before the transfer fails.",
    )
    transfer_fallback: Literal["reload", "fail"] = Field(
        "reload",
        description="nccl mode: what a failed or refused transfer does: reload = say so once and "
        "publish through disk (reload mode) for the rest of the run, counted in every step's "
        "transfer_fallback; fail = end the run with that line.",
    )
    inference_memory_wait_s: float = Field(
        120.0,
        ge=0,
        description="restart mode on a GPU shared with the trainer: seconds to wait, before each "
        "launch, for the server's claim (--gpu-memory-utilization x the GPU's memory) to be free "
        "while the old server releases it; then the run ends with one line.",
    )
    lora_adapter_name: str = Field(
        "policy",
        min_length=1,
        description="lora mode: the name the adapter is served under, replaced on every refresh; "
        "environments request it as their model name (e.g. --openai.model_name policy).",
    )
    lora_rank: int = Field(16, gt=0, description="lora mode: adapter rank.")
    lora_alpha: int = Field(32, gt=0, description="lora mode: adapter alpha.")
    lora_target_modules: list[str] = Field(
        ["q_proj", "v_proj"], description="lora mode: module names the adapter wraps."
    )

    # --- which inference server, and how restart mode launches vLLM -------------------------
    inference_server: str = Field(
        "auto",
        description="reload/lora modes: the server type the servers are, one of auto, "
        f"{', '.join(refreshable_server_types())} (atropos: our CPU engine; vllm: its dev-mode routes + "
        "atroposlib's worker extension); auto asks each server.",
    )
    inference_python: Optional[str] = Field(
        None,
        description="restart mode: the Python that runs vLLM (it lives in its own environment); fills "
        "{python} in inference_command. Default: $ATROPOS_VLLM_PYTHON, then the environment "
        "scripts/setup_vllm.sh made, then this Python.",
    )

    # --- distributed ---------------------------------------------------------------------
    parallel: Literal["ddp", "fsdp"] = Field(
        "ddp", description="Under torchrun: DDP or FSDP2 (gloo on CPU, NCCL on GPU)."
    )
    distributed_timeout: Optional[float] = Field(
        None,
        gt=0,
        description="Under torchrun: seconds a collective may wait for another rank before the run "
        "fails (the process group's timeout). Unset = the longest wait the loop plans: "
        "inference_startup_timeout + batch_wait_timeout + 600 s for a save, an API call and a server "
        "stop (NCCL's own default, 10 minutes, is shorter than a vLLM start-up plus a batch wait).",
    )

    # --- memory, precision and logits (GPU) -------------------------------------------------
    gradient_checkpointing: Optional[bool] = Field(
        None,
        description="Recompute each decoder layer's activations in backward (unset = on for CUDA, "
        "off on CPU).",
    )
    logprob_chunk_tokens: int = Field(
        512,
        ge=0,
        description="Compute token log-probabilities from the output embedding this many positions at "
        "a time, never materialising [tokens, vocab] logits (0 = the full-vocabulary path).",
    )
    prefix_sharing: Literal["auto", "off"] = Field(
        "auto",
        description="auto: the sequences of a batch that share a prompt are packed into one row and "
        "the prompt runs once, forward and backward (example_trainer/prefix_packing.py; same "
        "log-probabilities, less arithmetic), when the model's attention takes a custom mask (eager, "
        "sdpa) and a probe at set-up finds it exact; off: one padded row per sequence.",
    )
    pure_bf16: bool = Field(
        False,
        description="Opt-in: bf16 weights and optimizer state with no fp32 master copy (half the "
        "memory; small updates such as lr 1e-6 are lost to rounding). Needs dtype bfloat16.",
    )
    temperature: float = Field(
        1.0,
        gt=0,
        description="Divide the trainer's logits by this temperature: set it to the sampling "
        "temperature when the inference server reports logprobs at that temperature (SGLang); "
        "keep 1 for servers reporting raw logprobs (vLLM's default, the CPU engine).",
    )
    temperature_from_groups: bool = Field(
        False,
        description="Use each group's generation_params.temperature (when present) instead of "
        "temperature.",
    )

    @field_validator("inference_server")
    @classmethod
    def _known_inference_server(cls, v: str) -> str:
        """A server type whose backend can take new weights (see inference_clients.registry)."""
        return _one_of(v, ["auto", *refreshable_server_types()])

    @field_validator("loss_type")
    @classmethod
    def _known_loss(cls, v: str) -> str:
        """A loss registered in example_trainer/losses/registry.py."""
        return _one_of(v, list(OBJECTIVES))

    @field_validator("cpu_cores")
    @classmethod
    def _cores_here(cls, v: list[int]) -> list[int]:
        import os

        # the machine's cores, not this process's affinity: a launcher may start the trainer from a
        # process it kept off the trainer's cores (the demo's --schedule split does)
        machine = set(range(os.cpu_count() or 1)) | os.sched_getaffinity(0)
        missing = sorted(set(v) - machine)
        if missing:
            raise ValueError(
                f"core(s) {', '.join(map(str, missing))} are not available here (this machine has "
                f"cores 0-{max(machine)})"
            )
        return v

    @model_validator(mode="after")
    def _check(self) -> TrainingConfig:
        if len(self.adam_betas) != 2:
            raise ValueError("adam_betas must be two numbers")
        if self.eps_low >= 1:
            raise ValueError(
                "eps_low must be < 1 (the lower clip bound 1 - eps_low must stay positive)"
            )
        if self.pure_bf16 and self.dtype != "bfloat16":
            raise ValueError("pure_bf16 needs dtype bfloat16")
        if (
            self.loss_type == "cispo"
            and self.clip_reference == "proximal"
            and "clip_reference" in self.model_fields_set
        ):
            raise ValueError(
                "clip_reference proximal has no effect with loss_type cispo (its weight is the ratio "
                "against the sampler, clipped): drop clip_reference, or use loss_type grpo or gspo"
            )
        if self.loss_type == "cispo" and "tis_cap" in self.model_fields_set:
            raise ValueError(
                "tis_cap has no effect with loss_type cispo (its importance weight is clipped to "
                "[1 - eps_low, 1 + eps_high]): drop tis_cap, or use loss_type grpo or gspo"
            )
        return self

    def resolved_micro_batch_tokens(self) -> int:
        """The token budget per micro-batch (0 = split by gradient_accumulation_steps instead)."""
        if self.micro_batch_tokens is not None:
            return self.micro_batch_tokens
        if self.gradient_accumulation_steps > 1:
            return 0
        return self.seq_len * max(1, 16384 // self.seq_len)

    def planned_wait_s(self) -> float:
        """The longest time one rank can wait in a collective for rank 0 by design: rank 0 (re)starting
        the inference server, then waiting for a batch, plus ``WAIT_MARGIN_S`` for saving the weights,
        a slow API call and stopping the old server."""
        return self.inference_startup_timeout + self.batch_wait_timeout + WAIT_MARGIN_S

    def resolved_distributed_timeout(self) -> float:
        """``distributed_timeout``, or ``planned_wait_s()`` when unset."""
        return self.distributed_timeout or self.planned_wait_s()

    def resolved_inference_urls(self) -> list[str]:
        return list(self.inference_urls) or [f"http://127.0.0.1:{self.vllm_port}"]


# ----------------------------------------------------------------------------------------------
# CLI generated from the fields (atroposlib.utils.settings_cli, shared with run-api and serve-model)
# ----------------------------------------------------------------------------------------------
def build_parser(
    prog: str = "atropos-grpo", description: Optional[str] = None
) -> argparse.ArgumentParser:
    parser = CliParser(
        prog=prog,
        description=description
        or "GRPO trainer for atroposlib (reads batches from the trajectory API).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--config", type=Path, default=None, help="YAML file of TrainingConfig fields."
    )
    add_model_arguments(parser, TrainingConfig)
    return parser


def config_from_sources(
    model: type[BaseModel], yaml_path: Optional[Path], overrides: dict[str, Any]
) -> Any:
    """defaults < YAML < overrides, validated; raises ``ConfigError`` naming the bad field."""
    values: dict[str, Any] = {}
    if yaml_path is not None:
        loaded = load_yaml_mapping(yaml_path)
        values.update(loaded)
    values.update(overrides)
    try:
        return model.model_validate(values)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, model)) from None


def parse_config(argv: Optional[Sequence[str]] = None) -> TrainingConfig:
    """Parse ``argv`` (flags, optionally ``--config FILE``) into a validated ``TrainingConfig``."""
    args = build_parser().parse_args(argv)
    return config_from_sources(TrainingConfig, args.config, model_values(args, TrainingConfig))
