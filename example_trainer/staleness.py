"""How stale the trained data is, and what the trajectory API dropped for age: per step and per interval.

The API drops a group at batch formation when its oldest weights are more than ``max_staleness``
steps behind the trainer (``run-api --max-staleness``, 4 by default); the envs hold no more batches
than keeps them within it, given how far the servers' weights can trail the trainer
(``weights_lag``, which the trainer registers). ``StalenessReport`` reads the API's drop counts
(``GET /status``) after each step and gives the step's metrics (``stale_dropped_groups``,
``stale_dropped_total``, with the lag figures of ``metrics.lag_metrics``) and, every
``summary_interval`` steps, one log line: lag mean and max, the bound, the groups dropped.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Optional

from atroposlib.errors import AtroposError

from .config import TrainingConfig

if TYPE_CHECKING:
    from atroposlib.api.client import TrajectoryClient

log = logging.getLogger("atropos-grpo")


def weights_lag(cfg: TrainingConfig) -> int:
    """Steps by which the servers' weights can trail the trainer when a batch is formed: the
    refresh interval - 1, plus one while an asynchronous reload or LoRA load is still in flight."""
    lag = cfg.vllm_restart_interval - 1
    if (cfg.weight_refresh == "reload" and cfg.async_refresh) or (
        cfg.weight_refresh == "lora" and cfg.async_lora_load
    ):
        lag += 1
    return lag


class StalenessReport:
    """Per-step staleness metrics and the interval summary line (see the module docstring)."""

    def __init__(self, client: Optional[TrajectoryClient], cfg: TrainingConfig) -> None:
        self.client = client
        self.interval = cfg.summary_interval
        self.bound: Optional[int] = None
        self.total: Optional[int] = None  # the API's stale drops so far
        self._since_total = 0
        self._lags: list[float] = []
        self._lag_max: Optional[int] = None
        self._first_step: Optional[int] = None
        if client is not None:
            self._check(cfg)

    def _dropped_so_far(self) -> Optional[int]:
        """Groups the API has dropped for age so far (None when it cannot be asked)."""
        assert self.client is not None
        try:
            status = self.client.status()
        except AtroposError as e:
            log.debug("staleness: /status failed: %s", e)
            return None
        self.bound = status.max_staleness
        return sum(status.stale_dropped_by_env.values())

    def _check(self, cfg: TrainingConfig) -> None:
        """Say once at start when the API's bound will drop healthy groups."""
        self.total = self._dropped_so_far()
        lag = weights_lag(cfg)
        if self.bound is None:
            return
        if cfg.weight_refresh == "none":
            log.warning(
                "weight_refresh none: the servers keep their weights, so every group older than "
                "run-api's max_staleness (%d steps) will be dropped unless something else labels "
                "new weights; start run-api with --max-staleness off for such a run",
                self.bound,
            )
        elif self.bound < lag + 1:
            log.warning(
                "run-api drops groups more than %d step(s) stale, but with vllm_restart_interval %d%s "
                "the servers' weights trail by up to %d step(s): healthy groups will be dropped; "
                "raise run-api's --max-staleness to at least %d or refresh more often",
                self.bound,
                cfg.vllm_restart_interval,
                " and an asynchronous reload" if lag == cfg.vllm_restart_interval else "",
                lag,
                lag + 1,
            )

    def step_metrics(self, step: int, lag: dict[str, Any]) -> dict[str, Any]:
        """``stale_dropped_groups`` (this step), ``stale_dropped_total``; logs the summary line at
        the end of each interval. ``lag``: the step's ``lag_metrics``."""
        dropped = None
        if self.client is not None:
            total = self._dropped_so_far()
            if total is not None:
                dropped = total - self.total if self.total is not None else 0
                self.total = total
                self._since_total += dropped
        if self._first_step is None:
            self._first_step = step
        if lag.get("policy_lag") is not None:
            self._lags.append(float(lag["policy_lag"]))
        if lag.get("policy_lag_max") is not None:
            self._lag_max = max(self._lag_max or 0, int(lag["policy_lag_max"]))
        if self.interval and step % self.interval == 0:
            self._summary(step)
        return {"stale_dropped_groups": dropped, "stale_dropped_total": self.total}

    def _summary(self, step: int) -> None:
        mean = sum(self._lags) / len(self._lags) if self._lags else None
        log.info(
            "staleness, steps %s-%d: policy lag mean %s, max %s (bound %s); %d group(s) dropped for "
            "age (%s in the run)",
            self._first_step,
            step,
            f"{mean:.2f}" if mean is not None else "-",
            self._lag_max if self._lag_max is not None else "-",
            self.bound if self.bound is not None else "off",
            self._since_total,
            self.total if self.total is not None else "?",
        )
        self._lags, self._lag_max, self._first_step, self._since_total = [], None, None, 0


__all__ = ["StalenessReport", "weights_lag"]
