"""The demo's report files: the reward curve (PNG, matplotlib) and the HTML page of rollouts."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def moving_average(values: list[float], window: int) -> list[float]:
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out


def plot_curve(rows: list[dict[str, Any]], out_path: Path, title: str) -> Path:
    """Per-step mean reward (thin) and its 20-step moving average (thick) against the trainer step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [(r["step"], r["reward_mean"]) for r in rows if r.get("reward_mean") is not None]
    fig, ax = plt.subplots(figsize=(7, 4))
    if pts:
        steps, rewards = zip(*pts, strict=False)
        ax.plot(steps, rewards, lw=0.7, alpha=0.45, label="mean reward of the batch")
        ax.plot(steps, moving_average(list(rewards), 20), lw=2.0, label="20-step moving average")
    ax.set_xlabel("trainer step")
    ax.set_ylabel("mean reward (fraction correct)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return Path(out_path)


def write_rollouts(early: list[dict[str, Any]], late: list[dict[str, Any]], out_path: Path) -> Path:
    """One HTML page: groups sampled early in the run, then groups sampled at the end."""
    from atroposlib.report.html import write_html_report

    groups = []
    for label, gs in (("early in the run", early), ("late in the run", late)):
        for g in gs:
            # the page groups and filters by env name: use it to tell the two phases apart
            groups.append({**g, "env_name": f"arithmetic, {label}"})
    return write_html_report(
        groups, out_path, title="Demo rollouts: early (first groups) and late (last groups)"
    )
