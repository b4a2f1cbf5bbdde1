"""The demo's live line (step, reward, tokens/s, policy lag) while the launcher runs, and the groups
it samples from the API early in the run and once the trainer has finished (for ``rollouts.html``)."""

from __future__ import annotations

import sys
import time
from typing import Any, Optional


def peek_groups(api_url: str, after: Optional[int]) -> list[dict[str, Any]]:
    """Up to 24 groups the API holds (after group id ``after``; ``None``: the newest); none when the
    API cannot be read (the report still gets written, without these samples)."""
    from atroposlib.api.client import TrajectoryClient
    from atroposlib.errors import AtroposError

    try:
        with TrajectoryClient(api_url, retries=2) as c:
            return [g.group for g in c.peek(limit=24, after=after).groups]
    except AtroposError as e:
        print(f"[demo] could not read sample rollouts: {e!r}", file=sys.stderr)
        return []


class Watch:
    """Called on every tick of the launcher's run: prints the live line (in place on a terminal, one
    line per 25 steps otherwise) and keeps the early and late sampled groups."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.tty = sys.stdout.isatty()
        self.shown = self.bucket = 0
        self.t_loop: Optional[float] = None
        self.early: list[dict[str, Any]] = []
        self.late: list[dict[str, Any]] = []
        self.late_taken = False

    def tick(self, runner: Any) -> None:
        from example_trainer.metrics import read_metrics

        if self.t_loop is None:
            self.t_loop = time.perf_counter()
        rows = read_metrics(runner.plan.metrics_source)
        if rows and rows[-1]["step"] != self.shown:
            self._show(rows[-1], runner.api_url)
        trainer = runner.proc("trainer")
        if not self.late_taken and trainer is not None and trainer.poll() == 0:
            self.late_taken = True
            self.late.extend(peek_groups(runner.api_url, after=None))

    def _show(self, m: dict[str, Any], api_url: str) -> None:
        self.shown = m["step"]
        if not self.early and self.shown >= 3:  # the API keeps only recent groups
            self.early.extend(peek_groups(api_url, after=0))
        line = (
            f"[demo] step {m['step']:>4}/{self.steps}  reward {m.get('reward_mean') or 0:.3f}  "
            f"tokens/s {m.get('tokens_per_s', 0):6.0f}  lag {m.get('policy_lag') or 0:.1f}"
        )
        if self.tty:
            print("\r" + line, end="", flush=True)
        elif self.shown // 25 > self.bucket or self.shown == self.steps:  # one line per 25
            self.bucket = self.shown // 25
            print(line, flush=True)
