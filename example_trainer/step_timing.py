"""Where a trainer step's wall time goes: named phases, timed once per step and logged in its metrics row.

A step's row (``metrics.jsonl``) is written after the weights are published and before the checkpoint
and the acknowledgement, so the interval a row accounts for runs from the previous row's write to its
own: the previous step's checkpoint and ack, then this step's wait for a batch, preparation, forward,
backward, optimizer and publish. ``time_step_s`` is that interval (what a step really costs, row to
row; the first row counts from the loop's start) and the phases add up to it, the remainder being
``time_other_s`` (logging, the progress line, statistics).

=================  ===============================================================================
``time_wait_s``    waiting for ``GET /batch`` (and its broadcast to the other ranks)
``time_prepare_s`` groups -> sequences -> padded micro-batches on the device (``batching.py``)
``time_forward_s`` the policy's forward and the loss terms (and a reference model's forward)
``time_backward_s`` ``loss.backward()`` (with DDP/FSDP, the gradient collectives it waits for)
``time_optimizer_s`` zero_grad, gradient clipping, the AdamW step and the schedule
``time_publish_s`` the trainer's side of the weight refresh (save; a synchronous push included)
``time_checkpoint_s`` the previous step's resumable checkpoint, when one was due
``time_ack_s``     the previous step's ``POST /batch/ack``
=================  ===============================================================================

Beside them ``trainer_cpu_s``: the trainer process's CPU seconds (all threads) over the same interval. On a
CPU, compute phases that keep ``threads`` cores busy burn about threads x their wall time; much more
means threads spin waiting for each other (too many threads for the cores left free), much less means
they wait for cores other processes hold.

On a CUDA device every phase boundary synchronises the device, so a phase owns the kernels it
launched (that costs a little overlap; CPU phases are synchronous anyway).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Optional

PHASES = (
    "wait",
    "prepare",
    "forward",
    "backward",
    "optimizer",
    "publish",
    "checkpoint",
    "ack",
)


class StepTimer:
    """Accumulates wall time per phase between two ``row`` calls (one metrics row each)."""

    def __init__(
        self,
        sync: Optional[Callable[[], None]] = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._sync = sync
        self._clock = clock  # wall time; time.process_time gives CPU time (bench/step_breakdown.py)
        self._spent = dict.fromkeys(PHASES, 0.0)
        self._since = clock()
        self._cpu_since = time.process_time()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charge the time inside the block to ``name`` (one of ``PHASES``)."""
        if name not in self._spent:
            raise KeyError(f"unknown step phase {name!r}; one of {', '.join(PHASES)}")
        if self._sync is not None:
            self._sync()
        t0 = self._clock()
        try:
            yield
        finally:
            if self._sync is not None:
                self._sync()
            self._spent[name] += self._clock() - t0

    def row(self) -> dict[str, float]:
        """The ``time_*_s`` fields since the previous row, then start the next interval."""
        now = self._clock()
        total = now - self._since
        out = {f"time_{k}_s": v for k, v in self._spent.items()}
        out["time_other_s"] = max(0.0, total - sum(self._spent.values()))
        out["time_step_s"] = total
        cpu = time.process_time()
        # CPU seconds of this process (all its threads) over the interval: above threads x the
        # compute phases' wall time, threads wait for each other (spinning at barriers)
        out["trainer_cpu_s"] = cpu - self._cpu_since
        self._spent = dict.fromkeys(PHASES, 0.0)
        self._since, self._cpu_since = now, cpu
        return out


class NullTimer(StepTimer):
    """Times nothing: for callers of ``train_step`` that keep no breakdown."""

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        yield


def device_sync(device_type: str) -> Optional[Callable[[], None]]:
    """What a phase boundary waits on: the CUDA stream on a GPU, nothing on CPU."""
    if device_type != "cuda":
        return None
    import torch

    return torch.cuda.synchronize


def breakdown(rows: list[dict], skip_first: int = 1) -> dict[str, float]:
    """Mean seconds per phase over the rows that carry a breakdown (the first ``skip_first`` left out:
    they include start-up), plus ``steps``; empty when no row has one."""
    timed = [r for r in rows if r.get("time_step_s") is not None]
    timed = timed[skip_first:] if len(timed) > skip_first else timed
    if not timed:
        return {}
    keys = [f"time_{k}_s" for k in PHASES] + ["time_other_s", "time_step_s"]
    out = {k: sum(float(r.get(k) or 0.0) for r in timed) / len(timed) for k in keys}
    for key in ("server_load_s", "train_tflop", "trainer_cpu_s"):
        values = [float(r[key]) for r in timed if r.get(key) is not None]
        if values:
            out[key] = sum(values) / len(values)
    out["steps"] = float(len(timed))
    return out


def format_breakdown(b: dict[str, float], peak_flops: float = 0.0, peak_label: str = "") -> str:
    """One line: mean step time and its phases with their shares (phases under 0.5% left out); with a
    measured matmul peak (FLOP/s), how far forward + backward ran from it."""
    if not b:
        return "no step-time breakdown recorded"
    total = b["time_step_s"]
    parts = []
    for name in (*PHASES, "other"):
        v = b.get(f"time_{name}_s", 0.0)
        if total > 0 and v / total >= 0.005:
            parts.append(f"{name} {v:.2f} s ({100 * v / total:.0f}%)")
    text = f"step {total:.2f} s mean over {int(b['steps'])} steps: " + ", ".join(parts)
    if "server_load_s" in b:
        text += f"; the server's load of new weights {b['server_load_s']:.2f} s"
    if "trainer_cpu_s" in b:
        text += f"; trainer CPU time {b['trainer_cpu_s']:.2f} s per step"
    compute_s = b.get("time_forward_s", 0.0) + b.get("time_backward_s", 0.0)
    if peak_flops > 0 and b.get("train_tflop") and compute_s > 0:
        limit_s = b["train_tflop"] * 1e12 / peak_flops
        text += (
            f". Forward + backward: {b['train_tflop'] * 1e3:.0f} GFLOP in {compute_s:.2f} s = "
            f"{b['train_tflop'] * 1e3 / compute_s:.1f} GFLOP/s, {compute_s / limit_s:.1f}x the "
            f"{limit_s:.2f} s a {peak_flops / 1e9:.0f} GFLOP/s matmul peak{peak_label} allows"
        )
    return text
