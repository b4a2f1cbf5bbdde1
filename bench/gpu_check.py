"""The GPU check: one call that measures the trainer on real model shapes and runs the whole loop on one GPU.

``scripts/gpu_check.sh`` runs this after installing the wheel bundle (docs/training.md). In order:

0. **preflight**: imports what every part needs (run-api, the engine's server, the arithmetic env, then
   torch and the trainer); the first one missing stops the check with one line, and so does a machine
   without CUDA (``--device cuda``, the default). Nothing is downloaded.
1. **trainer steps** (``bench/gpu_train_check.py``, one process per model so each starts with a clean
   GPU): Qwen2.5-0.5B and 1.5B shapes with random weights built on the device, bf16 compute over fp32
   master weights, gradient checkpointing, chunked log-probs and the full-vocabulary path beside them,
   at 4k/16k/32k tokens: tokens/s, MFU, peak memory, or OOM.
2. **the loop**: run-api, ``atropos-serve-model --device cuda`` (our engine), the arithmetic env
   (``environments/arithmetic_server.py serve``) and the GRPO trainer on the same GPU, the trainer
   reloading the engine's weights in place after every step (the demo's processes, with a tiny model
   built on the spot): steps/s and refresh times.
3. **the NCCL weight transfer** (``--weight-refresh nccl``, ``bench/gpu_transfer_check.py``): the
   trainer's own transfer code publishes a Qwen2.5-0.5B-shaped model in bf16 from ``cuda:0`` to a
   stand-in of vLLM's worker on ``cuda:1`` (its weight-transfer routes and NCCL receiving end:
   vLLM itself cannot be carried to that machine): set-up and per-transfer seconds, GB/s, checksum.
   Needs two GPUs (NCCL allows one rank per GPU); on one it says so and is skipped.

Each part has a time box (``--budget-s`` in all, default 450 s, so that one 10-minute command also holds
the install, the imports and the teardown); a part that runs out is reported as cut, never hangs.
Prints one table at the end and writes one JSON file (``--out``; default ``$OUT/gpu_check.json`` when
``$OUT`` is set, else ``runs/gpu_check.json``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from subprocs import wait_or_kill

REPO = Path(__file__).resolve().parent.parent
TRAIN_SCRIPT = REPO / "bench" / "gpu_train_check.py"
ENV_FILE = REPO / "environments" / "arithmetic_server.py"
NO_CUDA = (
    "gpu_check: error: no CUDA device (torch.cuda.is_available() is False); run this on a machine "
    "with an NVIDIA GPU and a CUDA build of torch"
)


# ----------------------------------------------------------------------------------------------
# 0. preflight
# ----------------------------------------------------------------------------------------------
def _import_env_file() -> None:
    spec = importlib.util.spec_from_file_location("_gpu_check_arithmetic_env", ENV_FILE)
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def preflight(device: str) -> Optional[str]:
    """None when everything the check needs imports (and CUDA is there for ``cuda``), else one line."""
    before_torch = [
        ("run-api", lambda: importlib.import_module("atroposlib.api.app")),
        ("run-api", lambda: importlib.import_module("atroposlib.cli.run_api")),
        ("atropos-serve-model", lambda: importlib.import_module("atroposlib.cli.serve_model")),
    ]
    after_torch = [
        ("the engine", lambda: importlib.import_module("atroposlib.inference.server")),
        ("the arithmetic env", _import_env_file),
        ("the trainer", lambda: importlib.import_module("example_trainer.grpo")),
        ("the trainer", lambda: importlib.import_module("demo.cli")),
        ("the model", lambda: importlib.import_module("transformers").Qwen2ForCausalLM),
    ]
    for what, load in before_torch:
        err = _try(what, load)
        if err:
            return err
    try:
        import torch
    except ImportError as e:
        return (
            f"gpu_check: error: torch is not installed for {sys.executable} ({e}); this check needs "
            "a CUDA build of torch (the bundle does not carry torch)"
        )
    for what, load in after_torch:
        err = _try(what, load)
        if err:
            return err
    if device == "cuda" and not torch.cuda.is_available():
        return NO_CUDA
    return None


def _try(what: str, load: Any) -> Optional[str]:
    try:
        load()
    except ImportError as e:
        missing = getattr(e, "name", None) or str(e)
        return (
            f"gpu_check: error: {what} cannot be imported: {type(e).__name__}: {e} (is {missing} in "
            "the bundle? rebuild it with scripts/build_gpu_bundle.sh and carry gpu-bundle/)"
        )
    return None


# ----------------------------------------------------------------------------------------------
# 1. trainer steps, one process per model shape
# ----------------------------------------------------------------------------------------------
def run_train_part(
    shapes: list[str], tokens: str, paths: str, steps: int, device: str, seconds: float, work: Path
) -> list[dict[str, Any]]:
    from bench.gpu_train_check import TABLE_HEAD

    rows: list[dict[str, Any]] = []
    end = time.monotonic() + seconds
    print(f"[gpu_check] trainer steps ({seconds:.0f} s at most)\n  {TABLE_HEAD}", flush=True)
    for i, shape in enumerate(shapes):
        left = end - time.monotonic()
        # the last shape gets what is left; others an even share of it, so one slow shape cannot
        # starve the next
        share = left if i == len(shapes) - 1 else left / (len(shapes) - i)
        out = work / f"train-{shape}.json"
        cmd = [sys.executable, str(TRAIN_SCRIPT), "--shape", shape, "--tokens", tokens]
        cmd += ["--paths", paths, "--steps", str(steps), "--device", device]
        cmd += ["--deadline-s", f"{max(share - 30, 1):.0f}", "--json-out", str(out)]
        status = _stream(cmd, timeout=max(share, 1.0))
        got = json.loads(out.read_text()) if out.exists() else []
        if status != "ok":
            got.append({"model": shape, "params": 0, "path": "-", "tokens": 0, "status": status})
        rows.extend(got)
    return rows


def _stream(cmd: list[str], timeout: float) -> str:
    """Run ``cmd``, echoing its lines indented; 'ok', 'cut (time)' or 'error (exit N): <last line>'."""
    import threading

    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO
    )
    last = [""]

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            if line.strip() and not line.startswith("model "):
                print("  " + line, flush=True)
                last[0] = line

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        if not wait_or_kill(proc, timeout):
            return "cut (time)"
    finally:
        reader.join(5)
    return (
        "ok"
        if proc.returncode == 0
        else f"error (exit {proc.returncode}): {last[0].strip()[-200:]}"
    )


# ----------------------------------------------------------------------------------------------
# 2. the loop on one GPU
# ----------------------------------------------------------------------------------------------
def run_loop_part(device: str, steps: int, seconds: float, work: Path) -> dict[str, Any]:
    """run-api + our engine + the arithmetic env + the trainer (reload in place) for ``steps`` steps."""
    from atroposlib.inference.tiny_model import build_tiny_model
    from atroposlib.utils.net import free_port, wait_for_http
    from demo.child_env import child_env as _child_env
    from demo.cli import parse_args
    from demo.servers import (
        Services,
        api_command,
        env_command,
        inference_command,
        trainer_command,
    )
    from example_trainer.metrics import read_metrics

    end = time.monotonic() + seconds
    print(f"[gpu_check] the loop on one device ({device}, {seconds:.0f} s at most)", flush=True)
    out = work / "loop"
    (out / "logs").mkdir(parents=True, exist_ok=True)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model = build_tiny_model(out / "model", seed=0)
    args = parse_args(["--steps", str(steps), "--prompts-per-step", "8", "--group-size", "8"])
    env = _child_env(1)
    svc = Services(out / "logs")
    api_url = f"http://127.0.0.1:{free_port()}"
    engine_port = free_port()
    engine_url = f"http://127.0.0.1:{engine_port}"
    result: dict[str, Any] = {"model": "tiny Llama (build_tiny_model)", "steps_asked": steps}
    rows: list[dict[str, Any]] = []
    status = "ok"
    t0 = time.monotonic()
    try:
        svc.start("run-api", api_command(int(api_url.rsplit(":", 1)[1]), out / "api-data"), env)
        argv, _ = inference_command("engine", model, engine_port, 1, out / "cache", device=device)
        svc.start("engine", argv, env)
        wait_for_http(api_url + "/health", timeout=120, proc=svc.procs["run-api"])
        wait_for_http(engine_url + "/health", timeout=180, proc=svc.procs["engine"])
        result["engine_device"] = _get_json(engine_url + "/health").get("device")
        result["startup_s"] = time.monotonic() - t0
        trainer_dir = out / "trainer"
        svc.start(
            "trainer", trainer_command(args, model, api_url, engine_url, trainer_dir, device), env
        )
        svc.start("env", env_command(args, api_url, engine_url, model, out), env)
        while True:
            time.sleep(0.5)
            rows = read_metrics(trainer_dir / "metrics.jsonl")
            trainer = svc.procs["trainer"]
            if trainer.poll() is not None:
                if trainer.returncode != 0:
                    status = f"error: trainer exit {trainer.returncode}: {svc.tail('trainer', 1)}"
                break
            dead = svc.dead()
            if dead:
                status = f"error: {dead} exited: {svc.tail(dead, 1)}"
                break
            if time.monotonic() > end:
                status = f"cut (time) after {len(rows)} steps"
                break
        rows = read_metrics(trainer_dir / "metrics.jsonl")
        result["engine_weights_version"] = _get_json(engine_url + "/health").get("weights_version")
    except Exception as e:  # a service that never came up: report it in the table, keep the JSON
        status = f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    finally:
        if status != "ok":  # the logs live in a temporary folder: keep their ends in the report
            result["log_tails"] = {name: svc.tail(name, 25) for name in svc.procs}
        svc.stop_all()
    result.update(_loop_figures(rows))
    result["status"] = status
    return result


# ----------------------------------------------------------------------------------------------
# 3. the weight transfer (--weight-refresh nccl) between two GPUs
# ----------------------------------------------------------------------------------------------
TRANSFER_SCRIPT = REPO / "bench" / "gpu_transfer_check.py"


def run_transfer_part(device: str, seconds: float, work: Path) -> dict[str, Any]:
    """The trainer's NCCL transfer of a Qwen2.5-0.5B-shaped model (bf16) from cuda:0 to a stand-in
    vLLM worker on cuda:1 (``bench/gpu_transfer_check.py``); skipped, saying why, with fewer GPUs."""
    if device != "cuda":
        return {"status": "skipped: needs CUDA (--device cpu)"}
    import torch

    n = torch.cuda.device_count()
    if n < 2:
        return {
            "status": f"skipped: needs 2 GPUs, {n} here (NCCL allows one rank per GPU: the trainer "
            "and vLLM's workers each need their own)"
        }
    from atroposlib.utils.net import free_port, wait_for_http

    print(f"[gpu_check] nccl transfer cuda:0 -> cuda:1 ({seconds:.0f} s at most)", flush=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(work / "transfer-worker.log", "wb")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "atroposlib.testing.fake_weight_transfer",
            "--port",
            str(port),
            "--out",
            str(work / "transfer.pt"),
            "--device",
            "cuda:1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )
    try:
        wait_for_http(url + "/health", timeout=60, proc=worker)
        proc = subprocess.run(
            [sys.executable, str(TRANSFER_SCRIPT), "--url", url],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=max(seconds - 10, 30),
        )
    except subprocess.TimeoutExpired:
        return {"status": "cut (time)"}
    except (TimeoutError, RuntimeError) as e:
        return {"status": f"error: the stand-in worker did not start: {e}"}
    finally:
        worker.kill()
        worker.wait(10)
        log.close()
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        return {"status": f"error (exit {proc.returncode}): {tail[-1][-200:] if tail else ''}"}
    return {"status": "ok", **json.loads(lines[-1])}


def _get_json(url: str) -> dict[str, Any]:
    import httpx

    try:
        return httpx.get(url, timeout=10).json()
    except Exception:
        return {}


def _loop_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(key: str, skip_first: bool = True) -> Optional[float]:
        vals = [
            r[key]
            for r in rows[1 if skip_first and len(rows) > 1 else 0 :]
            if r.get(key) is not None
        ]
        return sum(vals) / len(vals) if vals else None

    times = [r["time"] for r in rows if r.get("time") is not None]
    steady = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 2 else None
    return {
        "steps_done": len(rows),
        "steps_per_s": steady,  # over steps 2..n: the first includes CUDA start-up
        "train_step_s": mean("step_time_s"),
        "refresh_s": mean("refresh_s"),
        "engine_reload_s": mean("reload_push_s"),
        "tokens_per_s": mean("tokens_per_s"),
        "reward_mean_last": rows[-1].get("reward_mean") if rows else None,
    }


# ----------------------------------------------------------------------------------------------
# table, JSON, main
# ----------------------------------------------------------------------------------------------
def _device_info(device: str) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    import transformers

    info["transformers"] = transformers.__version__
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info["device"] = torch.cuda.get_device_name(0)
        info["device_memory_gib"] = round(props.total_memory / 2**30, 1)
    else:
        info["device"] = "CPU (smoke test of the script: not GPU figures)"
    return info


def table(report: dict[str, Any]) -> str:
    from bench.gpu_train_check import PEAK_BF16_TFLOPS, TABLE_HEAD, format_row

    d = report["machine"]
    lines = [
        f"gpu_check {report['date']} on {d['device']} (torch {d['torch']}, CUDA {d['cuda']}, "
        f"transformers {d['transformers']}, Python {d['python']})",
        f"trainer steps: bf16 autocast over fp32 weights, gradient checkpointing, one micro-batch of "
        f"the given tokens (sequences <= 4096), AdamW step timed; MFU = 6 x params x tokens/s / "
        f"{PEAK_BF16_TFLOPS:.0f} TFLOP/s (H100/H200 bf16 dense peak)",
        TABLE_HEAD,
    ]
    lines += [format_row(r) for r in report["train"]] or ["(not run)"]
    lp = report.get("loop")
    if lp:

        def f(v: Optional[float], fmt: str) -> str:
            return "-" if v is None else format(v, fmt)

        lines.append(
            f"loop ({lp['model']}; engine on {lp.get('engine_device', '?')}): {lp['steps_done']}/"
            f"{lp['steps_asked']} steps, {f(lp['steps_per_s'], '.2f')} steps/s, train step "
            f"{f(lp['train_step_s'], '.3f')} s, refresh (save + hand-off) {f(lp['refresh_s'], '.3f')} s, "
            f"engine reload {f(lp['engine_reload_s'], '.3f')} s, engine weights_version "
            f"{lp.get('engine_weights_version')}; {lp['status']}"
        )
    else:
        lines.append("loop: not run")
    tr = report.get("transfer")
    if tr and tr.get("status") == "ok":
        lines.append(
            f"nccl transfer ({tr['shape']}, {tr['mib']:.0f} MiB bf16, cuda:0 -> cuda:1 stand-in "
            f"worker): set-up {tr['setup_s']:.2f} s, per transfer "
            f"{', '.join(f'{t:.3f}' for t in tr['transfer_s'])} s ({tr['gb_per_s']:.1f} GB/s), "
            f"checksum {'ok' if tr['checksum_ok'] else 'MISMATCH'}"
        )
    else:
        lines.append(f"nccl transfer: {tr['status'] if tr else 'not run'}")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=None, help="JSON report path")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: smoke test only")
    p.add_argument("--shapes", default="qwen2.5-0.5b,qwen2.5-1.5b")
    p.add_argument("--tokens", default="4096,16384,32768")
    p.add_argument("--paths", default="chunked,full-vocab")
    p.add_argument("--train-steps", type=int, default=2, help="timed steps per configuration")
    p.add_argument("--loop-steps", type=int, default=8)
    p.add_argument("--parts", default="train,loop,transfer")
    p.add_argument("--budget-s", type=float, default=450.0, help="for everything after preflight")
    p.add_argument(
        "--bundle-line", default="", help="(from gpu_check.sh) what the bundle install did"
    )
    args = p.parse_args(argv)
    out = args.out
    if out is None:
        out = (
            Path(os.environ["OUT"]) / "gpu_check.json"
            if os.environ.get("OUT")
            else REPO / "runs" / "gpu_check.json"
        )

    err = preflight(args.device)
    if err:
        print(err, file=sys.stderr)
        return 1
    parts = {s.strip() for s in args.parts.split(",") if s.strip()}
    t_start = time.monotonic()
    report: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": _device_info(args.device),
        "bundle": args.bundle_line,
        "peak_bf16_tflops": None,
        "train": [],
        "loop": None,
        "transfer": None,
    }
    from bench.gpu_train_check import PEAK_BF16_TFLOPS

    report["peak_bf16_tflops"] = PEAK_BF16_TFLOPS
    with tempfile.TemporaryDirectory(prefix="gpu_check-") as tmp:
        work = Path(tmp)
        loop_share = 0.4 if "loop" in parts else 0.0
        # reserved only where it can run (it needs CUDA, then skips at once with fewer than 2 GPUs)
        transfer_s = 75.0 if "transfer" in parts and args.device == "cuda" else 0.0
        if "train" in parts:
            train_s = (args.budget_s - transfer_s) * (1 - loop_share)
            report["train"] = run_train_part(
                [s for s in args.shapes.split(",") if s],
                args.tokens,
                args.paths,
                args.train_steps,
                args.device,
                train_s,
                work,
            )
        if "loop" in parts:
            left = args.budget_s - transfer_s - (time.monotonic() - t_start)
            report["loop"] = run_loop_part(args.device, args.loop_steps, max(left - 15, 30), work)
        if "transfer" in parts:
            left = args.budget_s - (time.monotonic() - t_start)
            report["transfer"] = run_transfer_part(args.device, max(left - 5, 30), work)
    report["seconds"] = time.monotonic() - t_start
    text = table(report)
    print("\n" + text, flush=True)
    report["table"] = text
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"[gpu_check] wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
