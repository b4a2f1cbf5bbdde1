"""The trainer's end of the trajectory API: registration, each batch (pulled by rank 0, broadcast to the
other ranks), its acknowledgement.

Rank 0 holds the ``TrajectoryClient``: it registers the run (``POST /register``, at the step it starts
from), polls ``GET /batch`` until a batch is ready (the API being briefly unreachable is retried) and
acknowledges each batch after its update (``POST /batch/ack``: never redelivered): ``ApiBatchFeed``.
The other ranks of a ``torchrun`` run get each batch by broadcast and talk to the API not at all
(``BatchFeed``). On one process the broadcast is a no-op.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from atroposlib.errors import APIUnavailable, AtroposError
from atroposlib.type_definitions import Registration
from example_trainer.config import TrainingConfig
from example_trainer.distributed import DistInfo, broadcast_object
from example_trainer.staleness import weights_lag
from example_trainer.step_timing import StepTimer

if TYPE_CHECKING:
    from atroposlib.api.client import TrajectoryClient

log = logging.getLogger("atropos-grpo")


@dataclass(frozen=True)
class Delivery:
    """One batch as every rank receives it: its groups, the API's id for the ack and the API's step
    (None from an API that numbers neither, as Atropos's own)."""

    groups: list[dict[str, Any]]
    batch_id: Optional[str]
    step: Optional[int]

    def already_trained(self, step: int) -> bool:
        """Redelivered after a crash between checkpoint and ack: its update is in the weights of
        trainer step ``step``."""
        return self.step is not None and self.step <= step


def register(client: TrajectoryClient, cfg: TrainingConfig, step: int) -> None:
    client.register(
        Registration(
            wandb_group=cfg.wandb_group,
            wandb_project=cfg.wandb_project,
            batch_size=cfg.batch_size,
            max_token_len=cfg.seq_len,
            checkpoint_dir=str(Path(cfg.save_path).resolve()),
            save_checkpoint_interval=cfg.checkpoint_interval,
            starting_step=step,
            num_steps=cfg.training_steps,
            weights_lag=weights_lag(cfg),
        )
    )


def wait_for_batch(
    client: TrajectoryClient, cfg: TrainingConfig
) -> tuple[list[dict[str, Any]], Optional[str], Optional[int]]:
    """Poll ``GET /batch`` until a batch is ready; the API being briefly unreachable is retried."""
    deadline = time.monotonic() + cfg.batch_wait_timeout
    while True:
        try:
            resp = client.get_batch()
            if resp.batch:
                return resp.batch, resp.batch_id, resp.step
        except APIUnavailable as e:
            log.warning("trajectory API unavailable, retrying: %s", e)
        if time.monotonic() > deadline:
            raise AtroposError(
                f"no batch from {cfg.api_url} for {cfg.batch_wait_timeout:.0f}s; is an env running?"
            )
        time.sleep(cfg.batch_poll_interval)


def open_client(cfg: TrainingConfig, step: int) -> TrajectoryClient:
    """Rank 0's client of the trajectory API, the run registered at ``step``."""
    from atroposlib.api.client import TrajectoryClient

    token = cfg.api_token or os.environ.get("ATROPOS_API_TOKEN")  # as every other client
    client = TrajectoryClient(cfg.api_url, token=token, timeout=120.0)
    register(client, cfg, step)
    return client


class BatchFeed:
    """What the loop asks of the API on every rank. This base is the other ranks' of a ``torchrun``
    run: each batch from rank 0's broadcast, nothing acknowledged, nothing to close."""

    def __init__(self, info: DistInfo) -> None:
        self.info = info

    def receive(self) -> Delivery:
        """The next batch, on every rank."""
        return Delivery(*broadcast_object((None, None, None), self.info))

    def ack(self, delivery: Delivery) -> None:
        """After the batch's update (and its checkpoint, when one was due): never redelivered."""

    def ack_redelivered(self, delivery: Delivery) -> None:
        """A batch whose update the weights already hold (``Delivery.already_trained``)."""

    def close(self) -> None:
        """Release the connection to the API."""


class ApiBatchFeed(BatchFeed):
    """Rank 0: pulls each batch from the API and broadcasts it; acknowledges it."""

    def __init__(
        self, client: TrajectoryClient, cfg: TrainingConfig, info: DistInfo, timer: StepTimer
    ) -> None:
        super().__init__(info)
        self.client = client
        self.cfg = cfg
        self.timer = timer

    def receive(self) -> Delivery:
        return Delivery(*broadcast_object(wait_for_batch(self.client, self.cfg), self.info))

    def ack(self, delivery: Delivery) -> None:
        """Charged to the step's ``ack`` phase."""
        if delivery.batch_id:
            with self.timer.phase("ack"):
                self.client.ack_batch(delivery.batch_id)

    def ack_redelivered(self, delivery: Delivery) -> None:
        if delivery.batch_id:
            self.client.ack_batch(delivery.batch_id)

    def close(self) -> None:
        self.client.close()


__all__ = [
    "ApiBatchFeed",
    "BatchFeed",
    "Delivery",
    "open_client",
    "register",
    "wait_for_batch",
]
