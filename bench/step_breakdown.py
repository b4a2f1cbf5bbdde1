"""One trainer step of the SmolLM2 preset in isolation: where its time goes, and how far from this machine's
compute limit each part runs.

Builds what the preset trains (SmolLM2-135M-Instruct with a rank-16 LoRA on every linear layer, the
trainer's own ``train_step``: chunked log-probs, the GRPO loss, AdamW) and one batch shaped like the
chat-arithmetic task's (4 questions in the model's chat template x 8 replies of 16 tokens; the reply
tokens are random, which costs the same arithmetic), then times ``--steps`` whole optimizer steps per
configuration (``--dtypes`` x ``--threads`` x ``--sharing``) with the trainer's phase timer (prepare,
forward, backward, optimizer) on the process's CPU clock, after one warm-up step: CPU time hardly moves
with other jobs on the machine (wall time, printed beside it, does), so configurations compare even on a
shared machine. ``--sharing``: the trainer's ``prefix_sharing`` (``off``: one padded row per sequence;
``auto``: a group's prompt runs once, ``example_trainer/prefix_packing.py``).

Beside it, the dense matmul peak measured here at the same dtype and thread count
(``example_trainer/flops.py``): the FLOPs the step computes (``GFLOP``, from the tokens it ran: packed
or padded) over that peak is the shortest its forward + backward could take, and the table gives the
measured forward + backward time (CPU seconds over threads) over it. The plain layout's FLOPs over the
peak is also the shortest any trainer that runs every prompt once per completion could take.

    python bench/step_breakdown.py [--dtypes float32,bfloat16] [--threads 1,2] [--sharing off,auto]
        [--steps 3] [--reply-tokens 16]

Each configuration runs in its own process (thread settings do not leak). Takes 3-6 minutes on 2 quiet
cores; the figures are only as good as the machine is quiet.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def synthetic_groups(tokenizer: Any, seed: int, reply_tokens: int = 16) -> list[dict[str, Any]]:
    """4 groups of 8 like the chat-arithmetic env's: chat-template prompts, random replies, 0/1 scores,
    inference logprobs."""
    from atroposlib.utils.chat_arithmetic_task import split_problems

    rng = random.Random(seed)
    train, _ = split_problems(1, 9, 30, seed)
    vocab = len(tokenizer)
    groups = []
    for problem in rng.sample(train, 4):
        text = tokenizer.apply_chat_template(
            problem.messages(), tokenize=False, add_generation_prompt=True
        )
        prompt = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        toks, masks, lps, scores = [], [], [], []
        for i in range(8):
            reply = [rng.randrange(100, vocab) for _ in range(reply_tokens)]
            toks.append(prompt + reply)
            masks.append([-100] * len(prompt) + reply)
            lps.append([1.0] * len(prompt) + [-rng.uniform(0.1, 3.0) for _ in reply])
            scores.append(float(i % 3 == 0))
        groups.append({"tokens": toks, "masks": masks, "scores": scores, "inference_logprobs": lps})
    return groups


def measure(
    dtype: str, threads: int, steps: int, sharing: str = "off", reply_tokens: int = 16
) -> dict[str, Any]:
    """Run in a child process: time ``steps`` optimizer steps at ``dtype`` on ``threads`` threads,
    ``sharing`` the trainer's ``prefix_sharing`` (auto: a group's prompt runs once), replies of
    ``reply_tokens``."""
    import time

    import torch

    torch.set_num_threads(threads)
    from demo.lora import LORA_FIELDS
    from demo.smollm2 import MODEL_CACHE
    from example_trainer.batching import flatten_batch
    from example_trainer.config import TrainingConfig
    from example_trainer.distributed import DistInfo
    from example_trainer.flops import matmul_peak, model_cost, step_flops
    from example_trainer.model_setup import attention_kernel, load_policy, set_attention
    from example_trainer.output_head import inspect_output_head
    from example_trainer.precision import resolve_precision
    from example_trainer.prefix_packing import prefix_sharing_check
    from example_trainer.step_timing import PHASES, StepTimer
    from example_trainer.train_step import train_step
    from example_trainer.trainer_setup import make_optimizer
    from example_trainer.weight_refresh import LoraRefresh

    cfg = TrainingConfig(
        model_name=str(MODEL_CACHE),
        device="cpu",
        dtype=dtype,
        batch_size=32,
        seq_len=128,
        lr=5e-4,
        **LORA_FIELDS,
        save_path=os.environ.get("TMPDIR", "/tmp"),
        prefix_sharing=sharing,
    )
    device = torch.device("cpu")
    model, tokenizer = load_policy(str(MODEL_CACHE), torch.float32, device)
    inspect_output_head(model)
    precision = resolve_precision(cfg, device, fsdp=False)
    set_attention(model, attention_kernel(cfg.attn_implementation, device, precision.compute))
    model = LoraRefresh(cfg).prepare_model(model)
    model.train()
    share = sharing != "off" and prefix_sharing_check(model) is None
    cost = model_cost(model)
    optimizer, scheduler = make_optimizer(model, cfg)
    groups = synthetic_groups(tokenizer, 0, reply_tokens)
    info = DistInfo()
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    rows = []
    for i in range(steps + 1):  # the first one warms up (allocations, kernel choice)
        # CPU time per phase (all threads of this process): unlike wall time, hardly moved by other
        # jobs on the machine, so configurations compare even on a shared machine; wall time beside it
        timer = StepTimer(clock=time.process_time)
        wall0 = time.perf_counter()
        with timer.phase("prepare"):
            flat = flatten_batch(groups, seq_len=cfg.seq_len)
        with timer.phase("optimizer"):
            optimizer.zero_grad(set_to_none=True)
        stats = train_step(model, None, flat, cfg, info, device, pad, timer, share_prefix=share)
        with timer.phase("optimizer"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            optimizer.step()
            scheduler.step()
        row = timer.row()
        row["wall_s"] = time.perf_counter() - wall0
        row["flop"] = step_flops(
            cost, stats["padded_tokens"], stats["padded_square_sum"], stats["head_tokens"]
        )
        if i:
            rows.append(row)
    t0 = time.perf_counter()
    peak = matmul_peak(dtype, threads=threads, seconds=1.5, cpu_clock=True)
    mean = {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]}
    return {
        "dtype": dtype,
        "threads": threads,
        "sharing": "on" if share else "off",
        "phases": {p: mean[f"time_{p}_s"] for p in PHASES if mean[f"time_{p}_s"] > 0},
        "step_s": mean["wall_s"],
        "cpu_s": mean["time_step_s"],
        "flop": mean["flop"],
        "peak_flops": peak,
        "peak_measure_s": time.perf_counter() - t0,
        "tokens": stats["padded_tokens"],
        "matmul_params": cost.matmul_params,
        "trained_params": cost.trained_matmul_params,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument(
        "--sharing",
        default="off,auto",
        help="the trainer's prefix_sharing values to measure (off: a row per sequence; auto: a "
        "group's prompt runs once)",
    )
    p.add_argument(
        "--reply-tokens",
        type=int,
        default=16,
        help="tokens per reply (16: the reply budget, what the untrained model writes; 11: the "
        "trained policy's bare equations, the loop's steps late in a run)",
    )
    p.add_argument(
        "--child", nargs=3, metavar=("DTYPE", "THREADS", "SHARING"), help=argparse.SUPPRESS
    )
    args = p.parse_args()
    if args.child:
        dtype, threads, sharing = args.child
        print(json.dumps(measure(dtype, int(threads), args.steps, sharing, args.reply_tokens)))
        return 0
    from demo.smollm2 import MODEL_CACHE

    if not (MODEL_CACHE / "config.json").is_file():
        raise SystemExit(
            "step_breakdown: run `atropos-import-smollm2` (or the SmolLM2 demo) once first"
        )
    results = []
    for dtype in args.dtypes.split(","):
        for threads in args.threads.split(","):
            for sharing in args.sharing.split(","):
                env = dict(os.environ, OMP_NUM_THREADS=threads, PYTHONPATH=str(REPO))
                argv = [sys.executable, __file__, "--steps", str(args.steps)]
                argv += ["--reply-tokens", str(args.reply_tokens)]
                argv += ["--child", dtype, threads, sharing]
                done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=REPO)
                if done.returncode != 0:
                    print(f"{dtype} x{threads} sharing {sharing}: failed\n{done.stderr[-2000:]}")
                    continue
                results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    if not results:
        return 1
    r0 = results[0]
    print(
        f"\nSmolLM2-135M-Instruct + LoRA r16, one step of 32 sequences (replies of "
        f"{args.reply_tokens} tokens); "
        f"{r0['matmul_params'] / 1e6:.0f}M matmul weights, {r0['trained_params'] / 1e6:.1f}M trained"
    )
    print(
        "CPU seconds per phase (all threads; robust to other jobs), wall seconds per step, and the "
        "step's forward + backward against the matmul peak (CPU time over thread count vs FLOPs / peak)"
    )
    print(
        f"{'dtype':<9} {'thr':>3} {'shared':>6} {'tokens':>6} {'GFLOP':>6} {'wall s':>7} "
        f"{'CPU s':>6} {'prepare':>8} {'forward':>8} {'backward':>9} {'optim':>6} "
        f"{'peak GFLOP/s':>12} {'fwd+bwd / limit':>16}"
    )
    for r in results:
        ph = r["phases"]
        compute = (ph.get("forward", 0.0) + ph.get("backward", 0.0)) / r["threads"]
        limit = r["flop"] / r["peak_flops"]
        print(
            f"{r['dtype']:<9} {r['threads']:>3} {r['sharing']:>6} {r['tokens']:>6.0f} "
            f"{r['flop'] / 1e9:>6.0f} {r['step_s']:>7.2f} {r['cpu_s']:>6.2f} "
            f"{ph.get('prepare', 0):>8.3f} {ph.get('forward', 0):>8.2f} "
            f"{ph.get('backward', 0):>9.2f} {ph.get('optimizer', 0):>6.3f} "
            f"{r['peak_flops'] / 1e9:>12.0f} {compute / limit:>15.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
