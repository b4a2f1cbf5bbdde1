"""What skipping zero-advantage sequences saves a trainer step, and that it leaves the gradient as it was.

A group whose scores all agree (every reply right, or every reply wrong) has advantages of exactly 0, so
its policy gradient is 0; the trainer leaves such sequences out of the forward and backward
(``skip_zero_advantage``, on by default) while the loss's normaliser still counts their tokens. On a
sparse-reward task most groups early in a run are like that (BFCL's first RL steps: 26 of 28 groups;
the Harbor tasks: about 40% of the tokens).

For each batch, the trainer's own ``train_step`` runs twice on the same weights, SmolLM2-135M-Instruct
with the presets' rank-16 LoRA, prefix sharing and activation recomputation: once with the setting off
(every sequence computed), once on. It prints each batch's CPU seconds both ways (CPU time hardly moves
with other jobs on the machine), their ratio, and the largest difference between the two gradients;
then the optimizer steps on the skipped pass's gradient and the next batch runs.

Batches: ``--groups FILE`` replays a run's ``groups.jsonl`` (what the demo's env writes with
``data_path_to_save_groups``; ``--batch-groups`` groups a batch, as ``prompts_per_step``), else
synthetic groups in the chat template (``--equal-share`` of them with scores that all agree).

    python bench/zero_advantage_skip.py [--groups runs/X/groups.jsonl] [--batches 3]
        [--equal-share 0.5] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def synthetic_batches(
    tokenizer: Any, n: int, equal_share: float, seed: int = 0
) -> list[list[dict[str, Any]]]:
    """``n`` batches of 4 groups of 8: a ~300-token chat prompt, 48-token random replies, 0/1 scores;
    ``equal_share`` of the groups score every reply alike."""
    rng = random.Random(seed)
    vocab = len(tokenizer)
    batches = []
    for _ in range(n):
        groups = []
        for _ in range(4):
            words = " ".join(
                rng.choice(["file", "count", "lines", "word", "shell"]) for _ in range(200)
            )
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": words}], tokenize=False, add_generation_prompt=True
            )
            prompt = list(tokenizer(text, add_special_tokens=False)["input_ids"])
            equal = rng.random() < equal_share
            toks, masks, lps, scores = [], [], [], []
            for i in range(8):
                reply = [rng.randrange(100, vocab) for _ in range(48)]
                toks.append(prompt + reply)
                masks.append([-100] * len(prompt) + reply)
                lps.append([1.0] * len(prompt) + [-rng.uniform(0.1, 3.0) for _ in reply])
                scores.append(0.0 if equal else float(i % 3 == 0))
            groups.append(
                {"tokens": toks, "masks": masks, "scores": scores, "inference_logprobs": lps}
            )
        batches.append(groups)
    return batches


def replayed_batches(path: Path, n: int, per_batch: int) -> list[list[dict[str, Any]]]:
    """The first ``n`` batches of ``per_batch`` groups of a run's groups file, in its order."""
    groups = []
    with path.open() as f:
        for line in f:
            if line.strip():
                groups.append(json.loads(line))
            if len(groups) >= n * per_batch:
                break
    return [groups[i : i + per_batch] for i in range(0, len(groups), per_batch)][:n]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groups", type=Path, help="a run's groups.jsonl to replay")
    p.add_argument("--batch-groups", type=int, default=4, help="groups per batch when replaying")
    p.add_argument("--batches", type=int, default=3)
    p.add_argument("--equal-share", type=float, default=0.5, help="synthetic: all-agreeing share")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    if args.groups is not None and not args.groups.is_file():
        raise SystemExit(f"zero_advantage_skip: no groups file at {args.groups}")
    from demo.smollm2 import MODEL_CACHE

    if not (MODEL_CACHE / "config.json").is_file():
        raise SystemExit(
            "zero_advantage_skip: run `atropos-import-smollm2` (or the SmolLM2 demo) first"
        )

    import torch

    torch.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    from demo.lora import LORA_FIELDS, LORA_RANK
    from example_trainer.batching import flatten_batch
    from example_trainer.config import TrainingConfig
    from example_trainer.distributed import DistInfo
    from example_trainer.model_setup import enable_gradient_checkpointing, load_policy
    from example_trainer.prefix_packing import prefix_sharing_check
    from example_trainer.train_step import train_step
    from example_trainer.trainer_setup import make_optimizer
    from example_trainer.weight_refresh import LoraRefresh

    device = torch.device("cpu")
    model, tokenizer = load_policy(str(MODEL_CACHE), torch.float32, device)
    if args.groups is not None:
        batches = replayed_batches(args.groups, args.batches, args.batch_groups)
    else:
        batches = synthetic_batches(tokenizer, args.batches, args.equal_share)
    seq_len = max(len(t) for b in batches for g in b for t in g["tokens"])
    base = dict(
        model_name=str(MODEL_CACHE),
        device="cpu",
        seq_len=seq_len,
        micro_batch_tokens=2 * seq_len,
        lr=5e-4,
        **LORA_FIELDS,
        save_path=os.environ.get("TMPDIR", "/tmp"),
    )
    full = TrainingConfig(**base, skip_zero_advantage=False)
    skip = TrainingConfig(**base, skip_zero_advantage=True)
    enable_gradient_checkpointing(model)  # before the adapter, as the trainer's set-up does
    model = LoraRefresh(skip).prepare_model(model)
    model.train()
    share = prefix_sharing_check(model) is None
    optimizer, _ = make_optimizer(model, skip)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    trained = [q for q in model.parameters() if q.requires_grad]

    def timed(cfg: TrainingConfig, flat: Any) -> tuple[float, dict[str, float], list[Any]]:
        optimizer.zero_grad(set_to_none=True)
        t0 = time.process_time()
        stats = train_step(model, None, flat, cfg, DistInfo(), device, pad, share_prefix=share)
        cpu = time.process_time() - t0
        return cpu, stats, [q.grad.detach().clone() for q in trained]

    print(
        f"SmolLM2-135M-Instruct + LoRA r{LORA_RANK}, prefix sharing {'on' if share else 'off'}, "
        f"recomputation on, {args.threads} threads; CPU seconds per train_step"
    )
    print(
        f"{'batch':>5} {'seqs':>5} {'skipped':>7} {'full s':>7} {'skip s':>7} {'ratio':>6} {'max |dg|':>9} {'max |g|':>8}"
    )
    full_total = skip_total = 0.0
    worst = 0.0
    for i, groups in enumerate(batches):
        flat = flatten_batch(groups, seq_len=seq_len)
        if not flat.sequences:
            continue
        cpu_full, _, g_full = timed(full, flat)
        cpu_skip, stats, g_skip = timed(skip, flat)
        diff = max(float((a - b).abs().max()) for a, b in zip(g_full, g_skip, strict=True))
        scale = max(float(a.abs().max()) for a in g_full)
        worst = max(worst, diff)
        optimizer.step()
        full_total += cpu_full
        skip_total += cpu_skip
        print(
            f"{i + 1:>5} {len(flat.sequences):>5} {int(stats['zero_advantage_seqs']):>7} "
            f"{cpu_full:>7.1f} {cpu_skip:>7.1f} {cpu_skip / cpu_full:>6.2f} {diff:>9.2e} {scale:>8.2e}"
        )
    if not full_total:
        raise SystemExit("zero_advantage_skip: no batch had a sequence to train")
    print(
        f"total: full {full_total:.1f} s, skip {skip_total:.1f} s, ratio {skip_total / full_total:.2f}; "
        f"largest gradient difference {worst:.2e}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
