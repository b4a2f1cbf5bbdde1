"""Our trainer's gradient against TRL's GRPOTrainer's on one identical batch: same weights, same tokens.

``bench/trl_comparison.py`` compares two learning loops, which differ in who samples (vLLM against
transformers' ``generate``), so their curves part after the first step even when every setting
matches. This takes one batch our loop trained on (a step of a finished run: its groups from run-api's
store, and the LoRA adapter the trainer had published before that step) and computes one step's
gradient twice:

* ours: ``example_trainer.train_step.train_step``, set up as the trainer sets itself up, with the
  SmolLM2 preset's loss settings (the trainer's defaults: token aggregation, eps 0.2/0.28,
  ``clip_reference=proximal``, prefix sharing; the preset's dtype);
* TRL's: ``GRPOTrainer._compute_loss`` with ``bench/trl_grpo_chat.py``'s config (the one
  ``trl_comparison.py`` trains with: ``loss_type="dapo"``, ``num_iterations=1``, ``beta=0``), in TRL's
  own environment (``scripts/setup_trl_bench.sh``), on the same prompts and completions laid out as
  TRL lays them out (prompts left-padded, completions right-padded, the completion mask up to and
  including the end-of-turn token, and a multi-turn episode's tool results out of the loss through
  TRL's ``tool_mask``, counted as TRL counts them).

Both get the same advantages, TRL's (``scale_rewards="group"``: (r - mean) / (unbiased std + 1e-4)),
given to ours as the env-supplied per-token advantages, and both divide the logits by the
temperature the groups were sampled at (their ``generation_params``). Ours runs twice: with the batch's inference log-probabilities (what the loop trained
with: the importance weight min(pi/mu, tis_cap) against vLLM's sampler) and without them (on-policy,
weight 1, which is what TRL computes when it generates itself). Prints, per precision, the cosine
between the two LoRA gradients (over every LoRA tensor together, and the worst tensor), the ratio of
their norms, both losses and both entropies. Identical losses give a cosine of 1 up to rounding.

    python bench/trl_same_batch.py --run runs/bench-trl/two-digit/ours-split-s0-0 --step 30
        [--dtypes float32,bfloat16] [--out runs/same-batch]

Needs the run's store (``api-data``) and its published adapters (``trainer/weights``: the adapter of
step N - 1, or ``start``); the bench keeps the ones of its last steps. ``--side trl`` is the half that
TRL's Python runs; it imports nothing of atroposlib.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parent.parent
STD_EPS = 1e-4  # TRL's, added to the unbiased group std


def trl_advantages(scores: list[float]) -> list[float]:
    """TRL's ``scale_rewards="group"`` advantages of one group."""
    n = len(scores)
    mean = sum(scores) / n
    var = sum((s - mean) ** 2 for s in scores) / max(n - 1, 1)
    return [(s - mean) / (math.sqrt(var) + STD_EPS) for s in scores]


# ----------------------------------------------------------------------------------------------
# The batch: a step's groups from the run's store, split into TRL's prompt / completion layout
# ----------------------------------------------------------------------------------------------
def load_batch(run: Path, step: int) -> list[dict[str, Any]]:
    """The groups the trainer took for ``step`` (run-api's ``batches`` table), read back from the
    store's payload segments."""
    import sqlite3

    import orjson

    from atroposlib.api.store.segments import SegmentFiles

    data = run / "api-data"
    db = sqlite3.connect(f"file:{data / 'trajectories.sqlite3'}?mode=ro", uri=True)
    row = db.execute("SELECT seqs FROM batches WHERE step = ?", (step,)).fetchone()
    if row is None:
        have = [s for (s,) in db.execute("SELECT step FROM batches ORDER BY step")]
        kept = f"steps {have[0]}..{have[-1]}" if have else "no batch"
        raise SystemExit(f"no batch for step {step} in {data}; it has {kept}")
    seqs = orjson.loads(row[0])
    segments = SegmentFiles(data / "blobs")
    groups = []
    for seq in seqs:
        segno, off, length, crc = db.execute(
            "SELECT segment, offset, length, crc FROM groups WHERE seq = ?", (seq,)
        ).fetchone()
        blob = segments.read(segno, off, length, crc)
        if blob is None:
            raise SystemExit(f"group {seq} of step {step}: its payload failed its checksum")
        groups.append(orjson.loads(blob))
    return groups


def split_sequences(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per sequence: prompt ids (before the first trained token), completion ids (from it), which
    completion tokens are trained (a multi-turn episode's tool results and template tokens are not:
    TRL's ``tool_mask``), the inference log-probabilities of the completion, and TRL's advantage of
    its group."""
    out = []
    for g in groups:
        adv = trl_advantages([float(s) for s in g["scores"]])
        for i, toks in enumerate(g["tokens"]):
            masks = g["masks"][i]
            first = next(t for t, m in enumerate(masks) if m != -100)
            inf = (g.get("inference_logprobs") or [None] * len(g["tokens"]))[i]
            out.append(
                {
                    "prompt": [int(t) for t in toks[:first]],
                    "completion": [int(t) for t in toks[first:]],
                    "trained": [int(m != -100) for m in masks[first:]],
                    "inference_logprobs": None if inf is None else [float(x) for x in inf[first:]],
                    "advantage": adv[i],
                    "score": float(g["scores"][i]),
                }
            )
    return out


def sampling_temperature(groups: list[dict[str, Any]]) -> Optional[float]:
    """The one temperature the batch's groups record (``generation_params``), or None when none
    records one (the trainer then reads them at its ``--temperature``, 1.0)."""
    found = {(g.get("generation_params") or {}).get("temperature") for g in groups}
    if len(found) != 1:
        raise SystemExit(
            f"the batch's groups record several temperatures: {sorted(found, key=str)}"
        )
    value = found.pop()
    return None if value is None else float(value)


def with_trl_advantages(groups: list[dict[str, Any]], inference: bool) -> list[dict[str, Any]]:
    """``groups`` as our trainer gets them, with TRL's advantages as the env-supplied per-token
    ones; without their inference log-probabilities unless ``inference`` (then the trainer takes
    every sequence as on-policy: weight 1, as TRL when it generates itself)."""
    out = []
    for g in groups:
        adv = trl_advantages([float(s) for s in g["scores"]])
        copy = {k: v for k, v in g.items() if inference or k != "inference_logprobs"}
        copy["advantages"] = [[a] * len(t) for a, t in zip(adv, g["tokens"], strict=True)]
        out.append(copy)
    return out


# ----------------------------------------------------------------------------------------------
# Ours
# ----------------------------------------------------------------------------------------------
def our_gradient(
    base: str, adapter: Path, groups: list[dict[str, Any]], dtype: str
) -> tuple[dict[str, Any], dict[str, float]]:
    """One step's LoRA gradient from the trainer's own pieces, set up as the trainer sets itself up
    (``bench/step_breakdown.py`` does the same), with the SmolLM2 preset's loss settings: the
    trainer's defaults, ``dtype``, temperatures from the groups."""
    import torch
    from peft import PeftModel

    from example_trainer.batching import flatten_batch
    from example_trainer.config import TrainingConfig
    from example_trainer.distributed import DistInfo
    from example_trainer.metrics import step_metrics
    from example_trainer.model_setup import attention_kernel, load_policy, set_attention
    from example_trainer.output_head import inspect_output_head
    from example_trainer.precision import resolve_precision
    from example_trainer.prefix_packing import prefix_sharing_check
    from example_trainer.train_step import train_step

    torch.manual_seed(0)
    cfg = TrainingConfig(model_name=base, seq_len=256, dtype=dtype, temperature_from_groups=True)
    device = torch.device("cpu")
    model, tokenizer = load_policy(base, torch.float32, device)
    inspect_output_head(model)
    precision = resolve_precision(cfg, device, fsdp=False)
    set_attention(model, attention_kernel(cfg.attn_implementation, device, precision.compute))
    model = PeftModel.from_pretrained(model, str(adapter), is_trainable=True)
    model.train()
    flat = flatten_batch(
        groups,
        seq_len=cfg.seq_len,
        temperature=cfg.temperature,
        temperature_from_groups=cfg.temperature_from_groups,
    )
    if flat.truncated:
        raise SystemExit(f"{flat.truncated} sequences are longer than {cfg.seq_len} tokens")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    share = prefix_sharing_check(model) is None
    stats = train_step(model, None, flat, cfg, DistInfo(), device, pad, share_prefix=share)
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    m = step_metrics(1, flat, stats, 0.0, 0.0, 1.0, 0.0)
    return grads, {
        "loss": float(m["loss"]),
        "entropy": float(m["entropy"]),
        "on_policy_sequences": float(m["on_policy_sequences"]),
    }


# ----------------------------------------------------------------------------------------------
# TRL's (run by TRL's Python)
# ----------------------------------------------------------------------------------------------
def trl_side(args: argparse.Namespace) -> int:
    import torch
    from datasets import Dataset
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    # the bench's own settings (trl_grpo_chat.py, beside this file), at this batch's temperature
    from trl_grpo_chat import SYNC_SETTINGS, common_settings
    from trl_grpo_chat import parse_args as bench_args

    torch.manual_seed(0)
    seqs = json.loads(Path(args.batch).read_text())
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model = PeftModel.from_pretrained(model, args.adapter, is_trainable=True)
    bench = bench_args(
        ["--model", args.model, "--out", str(args.out), "--dtype", args.dtype]
        + ["--temperature", str(args.temperature), "--steps", "1"]
    )
    config = GRPOConfig(
        **common_settings(bench), **SYNC_SETTINGS, per_device_train_batch_size=len(seqs)
    )
    dataset = Dataset.from_dict({"prompt": ["unused"] * len(seqs)})
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=config,
        train_dataset=dataset,
    )
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    p_len = max(len(s["prompt"]) for s in seqs)
    c_len = max(len(s["completion"]) for s in seqs)
    prompt_ids = torch.tensor([[pad] * (p_len - len(s["prompt"])) + s["prompt"] for s in seqs])
    prompt_mask = torch.tensor(
        [[0] * (p_len - len(s["prompt"])) + [1] * len(s["prompt"]) for s in seqs]
    )
    completion_ids = torch.tensor(
        [s["completion"] + [pad] * (c_len - len(s["completion"])) for s in seqs]
    )
    completion_mask = torch.tensor(
        [[1] * len(s["completion"]) + [0] * (c_len - len(s["completion"])) for s in seqs]
    )
    # TRL's multi-turn mask: 0 on the tool results inside a completion, which are not trained
    tool_mask = torch.tensor([s["trained"] + [0] * (c_len - len(s["trained"])) for s in seqs])
    inputs = {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "tool_mask": tool_mask,
        "advantages": torch.tensor([s["advantage"] for s in seqs], dtype=torch.float32),
        # as TRL counts it: the tokens its loss reads (completion_mask * tool_mask)
        "num_items_in_batch": (completion_mask * tool_mask).sum(),
        "old_per_token_logps": None,
    }
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.zero_grad(set_to_none=True)
    with trainer.compute_loss_context_manager():
        loss = trainer.compute_loss(trainer.model, inputs)
    trainer.accelerator.backward(loss)
    grads = {
        n: p.grad.detach().clone()
        for n, p in trainer.model.named_parameters()
        if p.grad is not None
    }
    entropy = trainer._metrics["train"]["entropy"][-1]
    torch.save(
        {"grads": grads, "loss": float(loss.detach()), "entropy": float(entropy)}, args.result
    )
    return 0


# ----------------------------------------------------------------------------------------------
# Comparison
# ----------------------------------------------------------------------------------------------
def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, float]:
    import torch

    names = sorted(set(ours) & set(theirs))
    if not names or len(names) != len(ours) or len(names) != len(theirs):
        raise SystemExit(
            f"the two sides' LoRA tensors differ: ours {len(ours)}, TRL's {len(theirs)}, shared {len(names)}"
        )
    a = torch.cat([ours[n].flatten().double() for n in names])
    b = torch.cat([theirs[n].flatten().double() for n in names])
    per = [
        float(
            torch.nn.functional.cosine_similarity(
                ours[n].flatten().double(), theirs[n].flatten().double(), dim=0
            )
        )
        for n in names
        if float(theirs[n].norm()) > 0
    ]
    return {
        "cosine": float(torch.nn.functional.cosine_similarity(a, b, dim=0)),
        "worst_tensor_cosine": min(per) if per else float("nan"),
        "norm_ours": float(a.norm()),
        "norm_trl": float(b.norm()),
        "norm_ratio": float(a.norm() / b.norm()) if float(b.norm()) > 0 else float("nan"),
    }


def adapter_before(run: Path, step: int) -> Path:
    weights = run / "trainer" / "weights"
    name = "start" if step <= 1 else f"step_{step - 1:07d}"
    path = weights / name
    if not (path / "adapter_config.json").exists():
        kept = sorted(p.name for p in weights.iterdir()) if weights.exists() else []
        raise SystemExit(
            f"no adapter {name} in {weights} (the weights step {step} trained from); kept: {kept}"
        )
    return path


def parse_args() -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """The parser and its flags (the hidden ones are what ``--side trl`` receives)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--run", type=Path, help="a finished run of our loop (with api-data and trainer/weights)"
    )
    p.add_argument("--step", type=int, help="the step whose batch to compare")
    p.add_argument("--model", default=None, help="the run's base model (default: SmolLM2's)")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--out", type=Path, default=REPO / "runs" / "same-batch")
    p.add_argument("--side", choices=["ours", "trl"], default="ours", help=argparse.SUPPRESS)
    p.add_argument("--batch", help=argparse.SUPPRESS)
    p.add_argument("--adapter", help=argparse.SUPPRESS)
    p.add_argument("--dtype", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--temperature", type=float, default=1.0, help=argparse.SUPPRESS)
    return p, p.parse_args()


def trl_gradients(
    trl_python: str,
    model: str,
    temperature: float,
    batch_file: Path,
    adapter: Path,
    dtype: str,
    out: Path,
) -> Any:
    """TRL's side, run by TRL's Python on the batch written to ``batch_file``: what it saved
    (``grads``, ``loss``, ``entropy``)."""
    import torch

    result = out / f"trl-{dtype}.pt"
    cmd = [trl_python, __file__, "--side", "trl", "--model", model]
    cmd += ["--temperature", str(temperature), "--batch", str(batch_file)]
    cmd += ["--adapter", str(adapter), "--dtype", dtype, "--result", str(result), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"TRL's side failed ({dtype}): {tail[0]}")
    return torch.load(result)


def compare_dtype(
    model: str, adapter: Path, groups: list[dict[str, Any]], dtype: str, theirs: Any
) -> list[dict[str, Any]]:
    """The table's rows of one precision: our gradient on-policy and with vLLM's log-probabilities,
    each against TRL's."""
    table = []
    for inference in (False, True):
        grads, m = our_gradient(model, adapter, with_trl_advantages(groups, inference), dtype)
        if inference and m["on_policy_sequences"]:
            print(f"({m['on_policy_sequences']:.0f} sequences came without vLLM log-probabilities)")
        c = compare(grads, theirs["grads"])
        table.append(
            {
                "dtype": dtype,
                "ours": "with vLLM logprobs (IS weight)" if inference else "on-policy",
                **c,
                "loss_ours": m["loss"],
                "loss_trl": theirs["loss"],
                "entropy_ours": m["entropy"],
                "entropy_trl": theirs["entropy"],
            }
        )
    return table


def print_table(table: list[dict[str, Any]]) -> None:
    print(
        f"{'dtype':9} {'ours':31} {'cosine':>8} {'worst':>8} {'|g| ours':>9} {'|g| TRL':>9} "
        f"{'ratio':>6} {'loss ours':>10} {'loss TRL':>10} {'H ours':>7} {'H TRL':>7}"
    )
    for r in table:
        print(
            f"{r['dtype']:9} {r['ours']:31} {r['cosine']:8.5f} {r['worst_tensor_cosine']:8.5f} "
            f"{r['norm_ours']:9.4f} {r['norm_trl']:9.4f} {r['norm_ratio']:6.3f} "
            f"{r['loss_ours']:+10.5f} {r['loss_trl']:+10.5f} {r['entropy_ours']:7.4f} "
            f"{r['entropy_trl']:7.4f}"
        )


def main() -> int:
    p, args = parse_args()
    if args.side == "trl":
        return trl_side(args)
    if args.run is None or args.step is None:
        p.error("--run and --step are required")
    sys.path.insert(0, str(REPO))
    import torch
    from trl_comparison import find_trl_python

    from demo.smollm2 import MODEL_CACHE

    model = args.model or str(MODEL_CACHE)
    if not (Path(model) / "config.json").is_file():
        raise SystemExit(f"no model at {model}: run the SmolLM2 demo's set-up first")
    if not (args.run / "api-data" / "trajectories.sqlite3").is_file():
        raise SystemExit(f"{args.run} has no run-api store (api-data/trajectories.sqlite3)")
    trl_python, why = find_trl_python()
    if trl_python is None:
        raise SystemExit(f"TRL's environment is not available: {why}")
    torch.set_num_threads(2)
    groups = load_batch(args.run, args.step)
    seqs = split_sequences(groups)
    recorded = sampling_temperature(groups)
    temperature = 1.0 if recorded is None else recorded
    said = (
        f"{temperature:g}" if recorded is not None else "1 (none recorded: the trainer's default)"
    )
    adapter = adapter_before(args.run, args.step)
    args.out.mkdir(parents=True, exist_ok=True)
    batch_file = args.out / f"batch-step{args.step}.json"
    batch_file.write_text(json.dumps(seqs))
    scores = [s["score"] for s in seqs]
    print(
        f"step {args.step} of {args.run}: {len(groups)} groups, {len(seqs)} sequences, "
        f"mean reward {sum(scores) / len(scores):.3f}, temperature {said}, "
        f"weights {adapter.name}"
    )
    table = []
    for dtype in [d for d in args.dtypes.split(",") if d]:
        theirs = trl_gradients(trl_python, model, temperature, batch_file, adapter, dtype, args.out)
        table += compare_dtype(model, adapter, groups, dtype, theirs)
    print_table(table)
    (args.out / f"same-batch-step{args.step}.json").write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
