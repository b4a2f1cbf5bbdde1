"""Where env metrics go (``MetricsSink``): Weights & Biases, or a null object when it is off.

``make_metrics_logger(use_wandb, ...)`` never blocks on a login prompt or the network: without
credentials (no ``WANDB_API_KEY``, no netrc entry) and no explicit ``WANDB_MODE`` it runs wandb
offline and says so in one log line; if wandb cannot start at all, metrics go to the null logger
(also said once).
"""

from __future__ import annotations

import logging
import netrc
import os
from typing import Any, Optional, Protocol

logger = logging.getLogger(__name__)


class MetricsSink(Protocol):
    """Where ``wandb_log`` sends a step's metrics (wandb, or nothing)."""

    def log(self, metrics: dict[str, Any], step: Optional[int] = None) -> None: ...

    def table(self, columns: list[str], rows: list[tuple[Any, ...]]) -> Any: ...

    def finish(self) -> None: ...


class NullMetricsLogger:
    """Accepts metrics and drops them (wandb off). ``last`` keeps the latest values for tests/tools."""

    enabled = False

    def __init__(self) -> None:
        self.last: dict[str, Any] = {}

    def log(self, metrics: dict[str, Any], step: Optional[int] = None) -> None:
        self.last = dict(metrics)

    def table(self, columns: list[str], rows: list[tuple[Any, ...]]) -> Any:
        return None

    def finish(self) -> None:
        pass


def _has_wandb_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        path = os.path.join(os.path.expanduser("~"), ".netrc")
        return os.path.exists(path) and netrc.netrc(path).authenticators("api.wandb.ai") is not None
    except (OSError, netrc.NetrcParseError):
        return False


class WandbMetricsLogger(NullMetricsLogger):
    """Logs to a wandb run (online, offline or disabled as the environment decides)."""

    enabled = True

    def __init__(self, run: Any) -> None:
        super().__init__()
        self.run = run

    def log(self, metrics: dict[str, Any], step: Optional[int] = None) -> None:
        super().log(metrics, step)
        self.run.log(metrics, step=step)

    def table(self, columns: list[str], rows: list[tuple[Any, ...]]) -> Any:
        import wandb

        t = wandb.Table(columns=columns)
        for r in rows:
            t.add_data(*r)
        return t

    def finish(self) -> None:
        self.run.finish()


def make_metrics_logger(
    use_wandb: bool,
    *,
    project: Optional[str],
    group: Optional[str],
    name: Optional[str],
    config: dict[str, Any],
) -> NullMetricsLogger:
    if not use_wandb:
        return NullMetricsLogger()
    mode = os.environ.get("WANDB_MODE")
    if mode is None and not _has_wandb_credentials():
        mode = "offline"
        logger.warning(
            "use_wandb is on but no wandb credentials were found: logging wandb OFFLINE (wandb sync later)"
        )
    if mode == "disabled":
        logger.info("wandb disabled by WANDB_MODE=disabled; metrics are not logged")
        return NullMetricsLogger()
    try:
        import wandb

        run = wandb.init(
            project=project or "atropos",
            group=group,
            name=name,
            config=config,
            mode=mode,
            settings=wandb.Settings(silent=True, init_timeout=30),
        )
        return WandbMetricsLogger(run)
    except Exception:  # wandb raises many types; metrics must never stop a run
        logger.exception("wandb could not start; metrics are not logged for this run")
        return NullMetricsLogger()


__all__ = ["MetricsSink", "NullMetricsLogger", "WandbMetricsLogger", "make_metrics_logger"]
