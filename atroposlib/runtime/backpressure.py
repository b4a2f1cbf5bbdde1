"""Backpressure from the trajectory API back to generation, and the spool's sender.

* ``held_room``: how many more items a ``serve`` env may start. Everything the env holds counts
  against its off-policy budget (``max_batches_offpolicy`` x derived batch size / group size):
  the API's queue as ``/status-env`` reports it, the groups in its spool not yet accepted, and the
  items in flight. Against a full API (503) the spool therefore stops growing at the budget
  instead of filling the disk.
* ``SpoolSender``: posts spooled groups in order. A 503/429 waits for the server's
  ``Retry-After`` (exponential backoff without one); the API being down, our token being refused
  (401/403, e.g. the API came back with another token) and other answers that are not about the
  group are retried with backoff, said once when they start and summarised once when they end.
  Only an answer about the group's content (413, 415, 422; a 400 three times running) moves it to
  ``rejected.jsonl``, with the reason and the command that resends it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Optional

from atroposlib.api.client import AsyncTrajectoryClient
from atroposlib.errors import APIError, APIUnavailable, AuthError
from atroposlib.runtime.spool import Spool

logger = logging.getLogger(__name__)

CONTENT_REJECTIONS = (413, 415, 422)
"""Statuses that say the group itself is unacceptable: it is dead-lettered, not retried."""
BAD_REQUEST_TRIES = 3
MAX_BACKOFF_SECONDS = 10.0
MAX_RETRY_AFTER_SECONDS = 60.0


def offpolicy_budget(max_batches_offpolicy: int, derived_batch_size: int, group_size: int) -> int:
    """Groups an env may hold ahead of the trainer (Atropos's off-policy limit)."""
    return max_batches_offpolicy * derived_batch_size // max(group_size, 1)


def held_room(budget: int, api_queue: int, spooled: int) -> int:
    """Items that may be in flight: the budget less what the API and the spool already hold."""
    return budget - api_queue - spooled


class SpoolSender:
    """The loop that moves groups from the ``Spool`` to ``POST /scored_data``."""

    def __init__(
        self,
        spool: Spool,
        client: AsyncTrajectoryClient,
        wake: asyncio.Event,
        counts: dict[str, int],
    ) -> None:
        self.spool, self.client, self.wake, self.counts = spool, client, wake, counts
        self.delay = 0.2
        self.bad_requests = 0
        self.trouble: Optional[str] = None  # what is failing now, said once
        self.trouble_since = 0.0
        self.trouble_attempts = 0
        for key in ("rejected", "send_retries", "auth_refusals", "backpressure_waits"):
            counts.setdefault(key, 0)

    def _backoff(self) -> float:
        d = self.delay
        self.delay = min(self.delay * 2, MAX_BACKOFF_SECONDS)
        return d

    def _troubled(self, kind: str, message: str) -> None:
        self.counts["send_retries"] += 1
        self.trouble_attempts += 1
        if self.trouble != kind:
            self.trouble, self.trouble_since, self.trouble_attempts = kind, time.monotonic(), 1
            logger.warning(
                "%s; %d group(s) wait in the spool, retrying", message, self.spool.unsent
            )

    def _recovered(self) -> None:
        if self.trouble is not None:
            logger.warning(
                "sending resumed after %d failed attempt(s) over %.1fs (%s)",
                self.trouble_attempts,
                time.monotonic() - self.trouble_since,
                self.trouble,
            )
        self.trouble = None
        self.delay = 0.2
        self.bad_requests = 0

    async def run(self) -> None:
        while True:
            nxt = self.spool.peek()
            if nxt is None:
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), timeout=0.5)
                except asyncio.TimeoutError:
                    pass
                continue
            offset, group = nxt
            wait = await self.send_one(offset, group)
            if wait:
                await asyncio.sleep(wait)

    async def send_one(self, offset: int, group: dict[str, Any]) -> float:
        """Post one group; the seconds to wait before the next attempt (0 when it is done)."""
        try:
            await self.client.post_scored_data(group)
        except APIUnavailable as e:
            if e.retry_after is not None:  # the server says when: believe it
                self.counts["backpressure_waits"] += 1
                self._troubled("backpressure", f"the API asks us to wait ({e})")
                return min(e.retry_after, MAX_RETRY_AFTER_SECONDS)
            self._troubled("unreachable", f"the API is unreachable ({e})")
            return self._backoff()
        except AuthError as e:
            self.counts["auth_refusals"] += 1
            self._troubled(
                "auth",
                f"the API refuses our token ({e.status_code}): check ATROPOS_API_TOKEN; "
                "nothing is dropped",
            )
            return self._backoff()
        except APIError as e:
            if e.status_code in CONTENT_REJECTIONS or (
                e.status_code == 400 and self.bad_requests + 1 >= BAD_REQUEST_TRIES
            ):
                self._reject(offset, group, e)
                return 0.0
            if e.status_code == 400:
                self.bad_requests += 1
            self._troubled(f"http {e.status_code}", f"the API answered {e}")
            return self._backoff()
        self.spool.ack(offset)
        self.counts["groups_sent"] = self.counts.get("groups_sent", 0) + 1
        self._recovered()
        return 0.0

    def _reject(self, offset: int, group: dict[str, Any], e: APIError) -> None:
        self.counts["rejected"] += 1
        self.bad_requests = 0
        self.spool.reject(offset, group, f"{e.status_code}: {e.message}")
        logger.error(
            "the API rejected group %s for good (%s); kept with the reason in %s. "
            "Once fixed, resend with: python -m atroposlib.runtime.spool resend %s",
            group.get("group_id"),
            e,
            self.spool.rejected_path,
            self.spool.dir,
        )


__all__ = [
    "CONTENT_REJECTIONS",
    "SpoolSender",
    "held_room",
    "offpolicy_budget",
]
