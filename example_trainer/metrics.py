"""Per-step metrics: always a JSONL file (one object per step), wandb when enabled (null object if not)."""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from example_trainer.batching import FlatBatch

log = logging.getLogger(__name__)


class _NullSink:
    """Stands in for wandb when it is disabled: every call does nothing."""

    def log(self, metrics: dict[str, Any], step: int) -> None:
        return None

    def close(self) -> None:
        return None


class _WandbSink:
    def __init__(self, project: str, group: str, config: dict[str, Any]) -> None:
        import wandb

        self._wandb = wandb
        self._run = wandb.init(project=project, group=group or None, config=config)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self._run.log(
            {f"train/{k}": v for k, v in metrics.items() if isinstance(v, (int, float))}, step=step
        )

    def close(self) -> None:
        self._run.finish()


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class MetricsLogger:
    """Appends one JSON object per step to ``path``; mirrors to wandb when ``use_wandb``."""

    def __init__(
        self,
        path: Path,
        *,
        use_wandb: bool = False,
        wandb_project: str = "",
        wandb_group: str = "",
        config: Optional[dict[str, Any]] = None,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", buffering=1)
        self._sink = (
            _WandbSink(wandb_project, wandb_group, config or {}) if use_wandb else _NullSink()
        )

    def log(self, metrics: dict[str, Any]) -> None:
        row = {k: _clean(v) for k, v in metrics.items()}
        self._fh.write(json.dumps(row) + "\n")
        self._sink.log(metrics, step=int(metrics.get("step", 0)))

    def keep_through(self, step: int) -> int:
        """Drop the rows of steps after ``step`` (a resumed trainer trains them again, so each step
        keeps one row); rewrites the file atomically. Returns how many rows were dropped."""
        self._fh.close()
        kept, dropped = [], 0
        for line in self.path.read_text(encoding="utf-8").split("\n"):
            if not line.strip():
                continue
            try:
                late = int(json.loads(line)["step"]) > step
            except (ValueError, KeyError, TypeError):
                late = True  # a half-written last row of a killed trainer
            if late:
                dropped += 1
            else:
                kept.append(line + "\n")
        if dropped:
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text("".join(kept), encoding="utf-8")
            tmp.replace(self.path)
        self._fh = open(self.path, "a", buffering=1)
        return dropped

    def close(self) -> None:
        self._fh.close()
        self._sink.close()


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """All rows of a metrics file; for a resumed run the last row of each step wins."""
    rows: dict[int, dict[str, Any]] = {}
    p = Path(path)
    if not p.exists():
        return []
    for line in p.read_text(encoding="utf-8").split("\n"):
        if line.strip():
            r = json.loads(line)
            rows[int(r["step"])] = r
    return [rows[k] for k in sorted(rows)]


def format_step_line(m: dict[str, Any], total: int) -> str:
    """The compact progress line printed by the trainer (and re-printed by the demo)."""
    return (
        f"step {m['step']:>4}/{total} reward {m.get('reward_mean', float('nan')):.3f} "
        f"loss {m.get('loss', 0.0):+.4f} tok/s {m.get('tokens_per_s', 0.0):7.0f} "
        f"lag {m.get('policy_lag', float('nan')):.1f} clip {m.get('clip_frac', 0.0):.3f}"
    )


def step_metrics(
    step: int,
    flat: FlatBatch,
    s: dict[str, float],
    grad_norm: float,
    lr: float,
    step_time: float,
    wait_time: float,
) -> dict[str, Any]:
    """The row ``metrics.jsonl`` gets for one step (see docs/training.md for each field)."""
    import torch

    tok = max(s["tokens"], 1.0)
    advs = [a for q in flat.sequences for a, m in zip(q.advantages, q.trained, strict=False) if m]
    adv_t = torch.tensor(advs) if advs else torch.zeros(1)
    scores = [q.score for q in flat.sequences]
    lag = (
        (step - 1 - sum(flat.policy_versions) / len(flat.policy_versions))
        if flat.policy_versions
        else None
    )
    return {
        "step": step,
        "reward_mean": sum(flat.group_scores) / len(flat.group_scores)
        if flat.group_scores
        else None,
        "reward_std": float(torch.tensor(scores).std(unbiased=False)) if scores else None,
        "loss": s["loss"],
        "kl": s["kl"],
        "distill": s["distill"],
        "adv_mean": float(adv_t.mean()),
        "adv_std": float(adv_t.std(unbiased=False)),
        "adv_abs_mean": float(adv_t.abs().mean()),
        "clip_frac": s["clipped"] / tok,
        "ratio_mean": s["ratio_sum"] / tok,
        "ratio_max": s["ratio_max"],
        "ratio_min": s["ratio_min"] if math.isfinite(s["ratio_min"]) else None,
        "mismatch_abs_delta": s["abs_delta_sum"] / tok,
        "mismatch_kl": s["mismatch_kl_sum"] / tok,
        "grad_norm": grad_norm,
        "lr": lr,
        "trained_tokens": int(s["tokens"]),
        # sequences whose ratio is against the current policy: they came without inference logprobs
        # (or use_inference_logprobs is off)
        "on_policy_sequences": int(s.get("on_policy_seqs", 0)),
        "tokens_per_s": s["seq_tokens"] / max(step_time, 1e-9),
        "step_time_s": step_time,
        "batch_wait_s": wait_time,
        "sequences": len(flat.sequences),
        "groups": len(flat.group_scores),
        "masked_groups": flat.masked_groups,
        "unscored_sequences": flat.unscored,
        "overlong_sequences": flat.overlong,
        "overlong_masked": flat.overlong_masked,
        "overlong_penalized": flat.overlong_penalized,
        "policy_lag": lag,
        "time": time.time(),
    }
