"""The ``serve`` loop: register, keep the API's queue fed, spool what it cannot take, shut down cleanly.

* Registration (``registration.py``) waits while the API answers "wait for trainer to start", with a
  hint; an API that never answers ends the run after ``unreachable_timeout``.
* Every tick reads ``/status-env``; the number of items in flight follows Atropos's rule
  (``max_batches_offpolicy`` x this env's derived batch size / group size, minus the queue, raised to
  honour ``min_batch_allocation``, limited by ``max_num_workers`` and scheduled evals), with
  ``max_batches_offpolicy`` capped by what the API says keeps groups within its staleness bound. Pausing only
  stops *starting* items: work in flight always finishes and its groups are kept.
* A worker past ``worker_timeout`` is cancelled and its item goes back to the backlog (3 tries).
  Failed rollouts are counted by cause (``failures.FailureTracker``: first of each cause logged,
  the rest summarised), back off exponentially, and a permanent inference error (401/403/404, a
  server that never answered) ends the run with ``RunFailed``. A progress line (``progress.py``)
  every ``progress_interval`` seconds; drop messages are logged once per kind.
* Every finished group goes through the on-disk ``Spool``; a sender posts them in order and, while
  the API is down or answers 503, waits and retries. Nothing is lost if the API is away for minutes.
* SIGINT/SIGTERM: stop starting items, let in-flight ones finish (bounded), try to flush the spool
  (what is left stays on disk for the next start), ``/disconnect-env``, return normally.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import signal
import time
from pathlib import Path
from typing import Optional, TypedDict

from atroposlib.api.client import AsyncTrajectoryClient
from atroposlib.errors import (
    APIError,
    APIUnavailable,
    ConfigError,
    InferenceUnavailable,
    RunFailed,
)
from atroposlib.inference_clients.generation_log import GenerationLog, item_log
from atroposlib.runtime.atropos_hooks import overrides
from atroposlib.runtime.backpressure import SpoolSender, held_room, offpolicy_budget
from atroposlib.runtime.config import EvalHandlingEnum
from atroposlib.runtime.context import EnvRuntime
from atroposlib.runtime.failures import FailureTracker
from atroposlib.runtime.metrics_logger import make_metrics_logger
from atroposlib.runtime.progress import FirstOfEachDrop, ProgressLine, progress_text
from atroposlib.runtime.registration import read_info, register
from atroposlib.runtime.sending import current_policy_version, send
from atroposlib.runtime.spool import Spool, SpoolSink
from atroposlib.runtime.step_hooks import StepHooks
from atroposlib.runtime.stopping import sleep_or_stop
from atroposlib.type_definitions import Item

logger = logging.getLogger(__name__)
MAX_ITEM_ATTEMPTS = 3


class Running(TypedDict):
    """An item in flight: the item, its worker task, when it started (monotonic seconds)."""

    item: Item
    task: asyncio.Task[None]
    start: float


class ServeRunner:
    """``serve`` for one env (see the module docstring)."""

    def __init__(
        self, env: EnvRuntime, *, tick_seconds: float = 0.2, shutdown_grace: float = 30.0
    ) -> None:
        self.env = env
        self.ctx = env.context
        self.ctx.fill_workers = self._fill_to_target  # what the base add_train_workers does
        self.cfg = env.config
        if self.cfg.group_size == 1 and self.cfg.ensure_scores_are_not_same:
            raise ConfigError(
                "group_size 1 with ensure_scores_are_not_same drops every group (a single score is "
                "always 'all equal'): set --env.group_size 2 or more, or "
                "--env.ensure_scores_are_not_same false"
            )
        self.tick_seconds = tick_seconds
        self._no_pending_info = False  # on_policy against an API without /status
        self.shutdown_grace = shutdown_grace
        self.client = AsyncTrajectoryClient(
            self.cfg.rollout_server_url,
            token=os.environ.get("ATROPOS_API_TOKEN"),
            retries=1,
            timeout=30.0,
        )
        self.stop = asyncio.Event()
        self.wake = asyncio.Event()
        self.slot_free = (
            asyncio.Event()
        )  # a worker finished: refill now rather than at the next tick
        self.running: dict[int, Running] = {}
        # timed-out tries per item, by id(item); the item is held so its id cannot be reused while
        # it is counted, and the entry goes when the item finishes or is given up
        self.attempts: dict[int, tuple[Item, int]] = {}
        self.counts: dict[str, int] = {
            "groups_sent": 0,
            "hook_errors": 0,
            "timeouts": 0,
            "items_started": 0,
            "rejected": 0,
            "api_errors": 0,
            "inference_unavailable": 0,
        }
        self.api_ok = True
        self._next_id = 0
        self.failures = FailureTracker(
            "rollout",
            unreachable_hint=" (is it running? check --openai.base_url; "
            "--env.unreachable_timeout sets how long to wait)",
        )
        self.fatal: Optional[str] = None
        self._capped_offpolicy: Optional[int] = None
        self.progress = ProgressLine(self.cfg.progress_interval)
        self.drop_filter = FirstOfEachDrop()
        name = self.cfg.wandb_name or env.name or type(env).__name__
        self.spool = Spool(
            self.cfg.spool_dir or Path("spool") / name,
            max_groups=self.cfg.spool_max_groups,
            max_bytes=self.cfg.spool_max_bytes,
        )
        self.hooks = StepHooks(env, self.counts, self.spool.pending)

    # --- lifecycle ---------------------------------------------------------------------------
    async def run(self) -> None:
        self._install_signals()
        env = self.env
        await env.setup()
        self.ctx.group_sink = SpoolSink(self.spool, self.wake)
        if self.spool.pending():
            logger.warning(
                "resending %d spooled group(s) left from an earlier run", self.spool.pending()
            )
        sender = asyncio.create_task(self._sender())
        self.drop_filter.install()
        try:
            if await self._register():
                await self._read_info()
                await self._setup_metrics()
                await self._main_loop()
        finally:
            try:
                await self._shutdown(sender)
            finally:
                self.drop_filter.remove()
        if self.fatal:
            raise RunFailed(self.fatal)

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
            except (NotImplementedError, RuntimeError):
                logger.debug("cannot install a handler for %s here", sig)

    def _on_signal(self, sig: int) -> None:
        if self.stop.is_set():
            logger.warning("second signal: abandoning in-flight work now")
            for entry in self.running.values():
                entry["task"].cancel()
        logger.warning(
            "received %s: finishing in-flight groups, then disconnecting", signal.Signals(sig).name
        )
        self.stop.set()

    async def _register(self) -> bool:
        return await register(self.env, self.client, self.stop)

    async def _read_info(self) -> None:
        if overrides(self.env, "get_server_info"):
            await self.env.get_server_info()  # an Atropos env file's own version
            return
        await read_info(self.env, self.client, self.stop)

    async def _setup_metrics(self) -> None:
        project = group = None
        if self.cfg.use_wandb:
            try:
                info = await self.client.wandb_info()
                project, group = info.project, info.group
            except (APIUnavailable, APIError) as e:
                logger.warning("no wandb project from the API (%s); using defaults", e)
        self.ctx.metrics_logger = make_metrics_logger(
            self.cfg.use_wandb,
            project=project,
            group=group,
            name=self.ctx.wandb_prepend,
            config=self.cfg.model_dump(mode="json"),
        )

    async def _main_loop(self) -> None:
        while not self.stop.is_set():
            env_id = self.ctx.env_id
            assert env_id is not None, "registration sets env_id before the loop starts"
            try:
                status = await self.client.status_env(env_id)
            except APIUnavailable:
                if self.api_ok:
                    logger.warning(
                        "trajectory API unreachable: not starting new items; in-flight work continues"
                    )
                self.api_ok = False
                self._reap_timeouts()
                await self._sleep_or_stop(1.0)
                continue
            except APIError as e:
                self.counts["api_errors"] += 1
                logger.warning(
                    "/status-env failed (%s)%s",
                    e,
                    "; registering again" if e.status_code == 404 else "",
                )
                self._reap_timeouts()
                if e.status_code == 404 and not await self._register():
                    return
                await self._sleep_or_stop(1.0)
                continue
            if not self.api_ok:
                logger.warning("trajectory API is back")
            self.api_ok = True
            self.ctx.status_dict = status.model_dump()
            if self.cfg.on_policy:
                self.ctx.status_dict["batch_in_training"] = await self._batch_in_training()
            if self.cfg.inference_weight != -1:
                await self.env.server.update_weight(status.env_weight)
            if overrides(self.env, "env_step_checks"):
                await self.env.env_step_checks()
            await self._step_checks(status.current_step)
            if self._done(status.current_step, status.queue_size):
                logger.info(
                    "the trainer is at step %d of %d and the API holds %d more group(s) for it: "
                    "enough to reach step %d; finishing (no new items)",
                    status.current_step,
                    self.ctx.effective_total_steps(self.cfg),
                    status.queue_size,
                    self.ctx.effective_total_steps(self.cfg),
                )
                return
            if overrides(self.env, "add_train_workers"):
                await self.env.add_train_workers()
            else:
                await self._fill_to_target()
            self._reap_timeouts()
            self.progress.maybe_log(self._progress_text)
            self.slot_free.clear()
            await self._sleep_or_stop(self.tick_seconds, also=self.slot_free)

    async def _batch_in_training(self) -> bool:
        """``on_policy``: does the trainer hold a delivered, unacknowledged batch (``/status``'s
        ``pending_batch``)? Unreachable now: assume so (start nothing this tick). An API without
        ``/status`` (Atropos's) cannot say: the gate is off, logged once."""
        if self._no_pending_info:
            return False
        try:
            return (await self.client.status()).pending_batch is not None
        except APIUnavailable:
            return True
        except APIError as e:
            self._no_pending_info = True
            logger.warning(
                "on_policy: the trajectory API does not report a batch in training (/status: %s); "
                "generating without waiting for the trainer",
                e,
            )
            return False

    def _done(self, step: int, queue_size: int) -> bool:
        ctx = self.ctx
        bs = max(ctx.effective_batch_size(self.cfg), 1)
        total = ctx.effective_total_steps(self.cfg)
        return step + (queue_size * self.cfg.group_size) // bs >= total

    # --- scheduling --------------------------------------------------------------------------
    def _target_in_flight(self) -> int:
        cfg, st = self.cfg, self.ctx.status_dict
        derived_batch_size = self.ctx.derived_batch_size(cfg)
        if derived_batch_size == -1:
            return 0
        if cfg.on_policy and st.get("batch_in_training"):
            return 0  # the trainer's next weights are not published yet
        limit = self.env.max_num_workers
        if self.hooks.eval_running():
            if cfg.eval_handling == EvalHandlingEnum.STOP_TRAIN:
                return 0
            if cfg.eval_handling == EvalHandlingEnum.LIMIT_TRAIN:
                limit = int(limit * cfg.eval_limit_ratio)
        queue, max_gs = st.get("queue_size", 0), max(st.get("max_group_size", cfg.group_size), 1)
        batches = self._offpolicy_batches()
        # what the spool holds counts too: against a full API it stops growing at the budget
        budget = offpolicy_budget(batches, derived_batch_size, cfg.group_size)
        room = held_room(budget, queue, self.spool.unsent)
        if batches <= 0:
            room = limit
        target = min(limit, room)
        batch_size = self.ctx.effective_batch_size(cfg)
        share = self.ctx.batch_share(cfg)
        if share is not None and batch_size > 0:
            wanted_groups = math.ceil(share * batch_size * max(batches, 1) / cfg.group_size)
            own_queue = (
                st.get("self_queue_size", 0) * max_gs // cfg.group_size
                if max_gs >= cfg.group_size
                else st.get("self_queue_size", 0)
            )
            target = max(target, min(limit, wanted_groups - own_queue - self.spool.unsent))
        return max(0, target)

    def _offpolicy_batches(self) -> int:
        """``max_batches_offpolicy``, capped by what keeps this env's groups within the API's
        staleness bound (``/status-env``'s ``max_batches_offpolicy``); the cap is said once."""
        own = self.cfg.max_batches_offpolicy
        allowed = self.ctx.status_dict.get("max_batches_offpolicy")
        if not isinstance(allowed, int) or own <= 0 or own <= allowed:
            return own
        if self._capped_offpolicy != allowed:
            self._capped_offpolicy = allowed
            logger.info(
                "holding at most %d batch(es) ahead of the trainer, not max_batches_offpolicy %d: "
                "more would outlive the API's max_staleness %s and be dropped",
                allowed,
                own,
                self.ctx.status_dict.get("max_staleness"),
            )
        return allowed

    async def _fill_to_target(self) -> None:
        await self._fill(self._target_in_flight())

    async def _fill(self, target: int) -> None:
        backlog = self.ctx.backlog
        while len(self.running) < target and not self.stop.is_set() and self.failures.ready():
            try:
                item = backlog.pop() if backlog else await self.env.get_next_item()
            except Exception as e:  # noqa: BLE001 - counted by cause and backed off
                self.counts["hook_errors"] += 1
                self.failures.failure(e)
                return
            if item is None:
                return
            self._start(item)

    def _start(self, item: Item) -> None:
        wid = self._next_id
        self._next_id += 1
        task = asyncio.create_task(self._work(item, self.ctx.curr_step))
        self.running[wid] = {"item": item, "task": task, "start": time.monotonic()}
        task.add_done_callback(lambda _t: self._finished(wid))
        self.counts["items_started"] += 1

    def _finished(self, wid: int) -> None:
        entry = self.running.pop(wid, None)
        if entry is not None:  # ran to its end (not reaped): its timeouts are history
            self.attempts.pop(id(entry["item"]), None)
        self.slot_free.set()  # refill now rather than at the next tick

    async def _work(self, item: Item, step: int) -> None:
        env = self.env
        current_policy_version.set(step)
        item_log.set(GenerationLog())  # what the servers report about this item's generations
        try:
            groups, backlog = await env.collect_trajectories(item)
            self.ctx.backlog.extend(backlog or [])
            if groups:
                groups = await env.postprocess_histories(groups)
            if groups:
                await send(env, groups, item)
            self.failures.success()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - counted by cause, summarised, backed off
            self._failed(item, e)
        try:
            await env.cleanup()
        except Exception:
            self.counts["hook_errors"] += 1
            logger.exception("cleanup() raised")

    def _failed(self, item: Item, e: Exception) -> None:
        verdict = self.failures.failure(e, ever_answered=self.env.server.ever_answered)
        if isinstance(e, InferenceUnavailable):
            self.counts["inference_unavailable"] += 1
            self.ctx.backlog.append(item)  # the item was fine; the server was not there
        elif verdict.cause.startswith("hook error"):
            self.counts["hook_errors"] += 1
        if verdict.fatal and not self.fatal:
            self.fatal = verdict.fatal
            self.stop.set()

    def _reap_timeouts(self) -> None:
        limit = self.cfg.worker_timeout
        if limit <= 0:
            return
        now = time.monotonic()
        for wid, entry in list(self.running.items()):
            if now - entry["start"] <= limit:
                continue
            entry["task"].cancel()
            self.running.pop(wid, None)
            self.counts["timeouts"] += 1
            item = entry["item"]
            tries = self.attempts.get(id(item), (item, 0))[1] + 1
            if tries < MAX_ITEM_ATTEMPTS:
                self.attempts[id(item)] = (item, tries)
                logger.warning(
                    "worker timed out after %.0fs; its item goes back to the backlog", limit
                )
                self.ctx.backlog.append(item)
            else:
                self.attempts.pop(id(item), None)
                logger.error("an item timed out %d times; giving up on it", MAX_ITEM_ATTEMPTS)

    async def _step_checks(self, new_step: int) -> None:
        await self.hooks.on_new_step(new_step)

    def _progress_text(self) -> str:
        ctx = self.ctx
        return progress_text(
            sent=self.counts["groups_sent"],
            all_equal=ctx.all_equal_kept,
            drops=dict(ctx.drop_counts),
            notes=dict(ctx.generation_notes),
            failures=self.failures.summary(),
            in_flight=len(self.running),
            spooled=self.spool.pending(),
            queue=ctx.status_dict.get("queue_size"),
            step=ctx.curr_step,
            total_steps=ctx.effective_total_steps(self.cfg),
        )

    # --- sending -----------------------------------------------------------------------------
    async def _sender(self) -> None:
        await SpoolSender(self.spool, self.client, self.wake, self.counts).run()

    async def _shutdown(self, sender: asyncio.Task[None]) -> None:
        tasks = [e["task"] for e in self.running.values()]
        # after a permanent error (a server that never answers) in-flight items cannot succeed
        grace = 0.0 if self.fatal else self.shutdown_grace
        if tasks:
            if grace:
                logger.info("waiting up to %.0fs for %d in-flight item(s)", grace, len(tasks))
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5.0)
        self.hooks.cancel_eval()
        deadline = time.monotonic() + 15.0
        while self.spool.pending() and time.monotonic() < deadline and not sender.done():
            await asyncio.sleep(0.1)
        sender.cancel()
        left = self.spool.pending()
        if left:
            logger.warning(
                "%d group(s) could not be sent; they stay in %s and are resent on the next start",
                left,
                self.spool.path,
            )
        if self.ctx.env_id is not None:
            try:
                await self.client.disconnect_env(self.ctx.env_id)
            except (APIUnavailable, APIError) as e:
                logger.warning("could not /disconnect-env: %s", e)
        self.progress.maybe_log(self._progress_text, force=True)
        self.failures.maybe_summarise(force=True)
        logger.info("serve finished: %s", " ".join(f"{k}={v}" for k, v in self.counts.items()))
        if managed := self.env.server.managed_stats.summary():
            logger.info("managed sessions: %s", managed)
        if counters := self.ctx.metrics.gauges_text():
            logger.info("env counters: %s", counters)
        if self.ctx.scorer is not None and (unscored := self.ctx.scorer.summary()):
            logger.info("scoring: %s", unscored)
        self.spool.close()
        self.ctx.close_scorer()
        await self.env.server.close()
        self.ctx.metrics_logger.finish()
        if self.ctx.jsonl_writer is not None:
            self.ctx.jsonl_writer.close()
        await self.client.aclose()

    async def _sleep_or_stop(self, seconds: float, also: Optional[asyncio.Event] = None) -> None:
        await sleep_or_stop(self.stop, seconds, also)


async def serve(env: EnvRuntime) -> None:
    """The ``serve`` subcommand (``BaseEnv.env_manager``)."""
    await ServeRunner(env).run()


__all__ = ["ServeRunner", "serve"]
