"""The ``process`` subcommand: make N groups locally, no trajectory API.

Items run concurrently (at most ``max_num_workers`` at once); each finished group is validated and
appended (flushed) to ``data_path_to_save_groups``; a tqdm bar shows groups done, mean score and rate.
At the end, or on Ctrl-C / SIGTERM, the JSONL is complete up to the last finished group and a
self-contained HTML report of it is written next to it (``<name>.html``). Both are created only once
a group is written: a run that fails in setup or writes nothing leaves no file behind.

Failed items are counted by cause (``FailureTracker``): the first of each cause is logged, the rest
summarised; consecutive failures back off. An item running past ``--env.worker_timeout`` is
cancelled, counted and retried (3 tries), as in ``serve``; scoring within it has its own per-sample
limit (``--env.score_timeout``, ``atroposlib.runtime.scoring``). The run ends with ``RunFailed`` (the CLI prints one line
and exits 1) when it wrote no group, when its first attempts all failed (it gives up early rather
than retrying a broken env), or at once on a permanent error (an inference server that answers
401/403/404, or that never answered within ``--env.unreachable_timeout``).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from atroposlib.errors import ConfigError, RunFailed, WorkerTimeout
from atroposlib.groups import Group
from atroposlib.runtime.context import EnvRuntime
from atroposlib.runtime.failures import FailureTracker
from atroposlib.runtime.metrics_logger import make_metrics_logger
from atroposlib.type_definitions import Item

if TYPE_CHECKING:
    from tqdm import tqdm

logger = logging.getLogger(__name__)
MAX_ITEM_ATTEMPTS = 3


class ProcessRunner:
    """``process`` for one env (see the module docstring)."""

    def __init__(
        self, env: EnvRuntime, n_groups: Optional[int] = None, progress: bool = True
    ) -> None:
        self.env = env
        self.n_groups = n_groups if n_groups is not None else env.config.total_steps
        self.progress = progress
        self.stop = asyncio.Event()
        self.done = 0
        self.attempted = 0
        self.failed = 0
        self.hook_errors = 0
        self.timeouts = 0
        self.item_attempts: dict[int, int] = {}
        self.scores: list[float] = []
        self.report_path: Optional[Path] = None
        self.exhausted = False
        self.interrupted = False
        self.fatal: Optional[str] = None
        self.failures = FailureTracker(
            "item",
            max_delay=2.0,
            unreachable_hint=" (is it running? check --openai.base_url; "
            "--env.unreachable_timeout sets how long to wait)",
        )

    async def run(self) -> None:
        env = self.env
        ctx = env.context  # Atropos's names for these are properties onto it (read by some envs)
        writer = ctx.jsonl_writer
        if writer is None:
            raise ConfigError("process needs --env.data_path_to_save_groups")
        self._install_signals()
        ctx.process_mode = True
        ctx.n_groups_to_process = self.n_groups
        ctx.group_size_to_process = env.config.group_size
        ctx.metrics_logger = make_metrics_logger(
            env.config.use_wandb,
            project="atropos-process",
            group=None,
            name=env.config.wandb_name,
            config=env.config.model_dump(mode="json"),
        )
        try:
            await env.setup()
            await self._produce()
        finally:
            writer.close()
            if writer.count:  # a run that wrote nothing leaves no file (the writer made none)
                self._write_report(writer.path)
            ctx.close_scorer()
            await env.server.close()
            ctx.metrics_logger.finish()
        summary = self.summary()
        if writer.count:
            logger.info("process: %d group(s) written to %s; %s", self.done, writer.path, summary)
        else:
            logger.info("process: no group written (no file created); %s", summary)
        if self.fatal:
            raise RunFailed(self.fatal)
        if self.done == 0 and not self.interrupted:
            raise RunFailed(f"process wrote no groups: {summary}")

    def summary(self) -> str:
        """One line: attempts, failures by cause, groups dropped by reason, what the managed
        sessions counted (token drifts, tool calls that did not parse)."""
        parts = [f"{self.attempted} attempt(s)"]
        if self.failures.total:
            parts.append(self.failures.summary())
        no_group = self.failed - self.failures.total
        if no_group > 0:
            drops = ", ".join(f"{r}: {n}" for r, n in sorted(self.env.context.drop_counts.items()))
            parts.append(f"{no_group} gave no group" + (f" (dropped: {drops})" if drops else ""))
        if self.exhausted and self.done < self.n_groups:
            parts.append("the env ran out of items")
        scorer = self.env.context.scorer
        for counted in (
            scorer.summary() if scorer else "",
            self.env.server.managed_stats.summary(),
        ):
            if counted:
                parts.append(counted)
        return ", ".join(parts)

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self.stop.set)
            except (
                NotImplementedError,
                RuntimeError,
            ):  # not the main thread / no signal support here
                logger.debug(
                    "cannot install a handler for %s here; Ctrl-C interrupts without a summary", sig
                )

    async def _produce(self) -> None:
        env, backlog = self.env, self.env.context.backlog
        concurrency = max(1, env.max_num_workers)
        max_attempts = max(self.n_groups * 5, self.n_groups + 10)
        give_up_after = max(10, 2 * concurrency)  # failures in a row before any success
        bar = self._bar()
        start = time.monotonic()
        running: set[asyncio.Future[Any]] = set()
        stop_wait = asyncio.ensure_future(self.stop.wait())
        try:
            while not self.stop.is_set():
                if self.failures.successes == 0 and self.failures.consecutive >= give_up_after:
                    n = self.failures.consecutive
                    self.fatal = f"process gave up after its first {n} attempts all failed: "
                    self.fatal += self.summary()
                    break
                ready = self.failures.ready()
                while (
                    ready
                    and len(running) < concurrency
                    and self.done + len(running) < self.n_groups
                    and self.attempted < max_attempts
                    and not self.exhausted
                ):
                    try:
                        item = backlog.pop() if backlog else await env.get_next_item()
                    except Exception as e:  # noqa: BLE001 - counted like any failed item
                        self.attempted += 1
                        self.failed += 1
                        self.hook_errors += 1
                        self.failures.failure(e)
                        ready = False
                        break
                    if item is None:
                        self.exhausted = True
                        break
                    self.attempted += 1
                    running.add(asyncio.ensure_future(self._within_limit(item)))
                if not running:
                    if ready or self.exhausted or self.attempted >= max_attempts:
                        break
                    await asyncio.wait({stop_wait}, timeout=self.failures.delay())
                    continue
                finished, running = await asyncio.wait(
                    running | {stop_wait},
                    return_when=asyncio.FIRST_COMPLETED,
                    timeout=None if self.failures.ready() else self.failures.delay(),
                )
                running.discard(stop_wait)
                finished.discard(stop_wait)
                if bar is not None:
                    bar.n = self.done
                    rate = self.done / max(time.monotonic() - start, 1e-9)
                    mean = sum(self.scores) / len(self.scores) if self.scores else float("nan")
                    bar.set_postfix(
                        mean_score=f"{mean:.3f}", groups_per_s=f"{rate:.2f}", refresh=False
                    )
                    bar.refresh()
            if self.stop.is_set() and not self.fatal:
                self.interrupted = True
                logger.warning("interrupted: keeping the %d group(s) already written", self.done)
        finally:
            for t in running:
                t.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
            stop_wait.cancel()
            if bar is not None:
                bar.close()
        if self.exhausted and self.done < self.n_groups:
            logger.warning(
                "get_next_item() returned None: the env has no more items (%d/%d groups)",
                self.done,
                self.n_groups,
            )

    async def _within_limit(self, item: Item) -> None:
        """``_one`` within ``--env.worker_timeout`` (as ``serve``): past it the item is cancelled,
        counted, and goes back to the backlog (at most ``MAX_ITEM_ATTEMPTS`` tries)."""
        limit = float(self.env.config.worker_timeout or 0)
        if limit <= 0:
            await self._one(item)
            return
        try:
            await asyncio.wait_for(self._one(item), limit)
        except asyncio.TimeoutError:
            self.timeouts += 1
            self.failed += 1
            tries = self.item_attempts[id(item)] = self.item_attempts.get(id(item), 0) + 1
            again = tries < MAX_ITEM_ATTEMPTS
            if again:
                self.env.context.backlog.append(item)
            how = "retried" if again else f"given up after {MAX_ITEM_ATTEMPTS} tries"
            self.failures.failure(WorkerTimeout(f"cancelled after {limit:g}s, {how}"))

    async def _one(self, item: Item) -> None:
        env = self.env
        try:
            groups, backlog = await env.collect_trajectories(item)
            env.context.backlog.extend(backlog or [])
            if groups:
                groups = await env.postprocess_histories(groups)
            written = []
            if groups:
                room = self.n_groups - self.done
                items: list[Optional[Group]] = groups if isinstance(groups, list) else [groups]
                written = await env.handle_send_to_api(
                    items[: max(room, 0)],
                    item,
                    do_send_to_api=False,
                    abort_on_any_max_length_exceeded=False,
                )
            if not written:
                self.failed += 1
            else:
                self.failures.success()
            for g in written:
                self.done += 1
                self.scores.extend(g["scores"])
            if written:
                await self._log_metrics()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - counted by cause, summarised, never per item
            self.failed += 1
            verdict = self.failures.failure(e, ever_answered=self.env.server.ever_answered)
            if verdict.cause.startswith("hook error"):
                self.hook_errors += 1
            if verdict.fatal and not self.fatal:
                self.fatal = verdict.fatal
                self.stop.set()

    async def _log_metrics(self) -> None:
        """Atropos calls ``wandb_log`` after every processed group, with the group count as step."""
        env, ctx = self.env, self.env.context
        step, ctx.curr_step = ctx.curr_step, self.done
        try:
            await env.wandb_log({})
        except Exception:
            self.hook_errors += 1
            logger.exception("wandb_log() raised")
        finally:
            ctx.curr_step = step

    def _bar(self) -> Optional[tqdm]:
        if not self.progress:
            return None
        from tqdm import tqdm

        return tqdm(
            total=self.n_groups,
            desc=f"{self.env.name or type(self.env).__name__} groups",
            unit="group",
        )

    def _write_report(self, path: Path) -> None:
        try:
            from atroposlib.report.html import write_html_report
        except ImportError:
            logger.warning("HTML report skipped: atroposlib.frontend.report is not available")
            return
        out = path.with_suffix(".html")
        try:
            self.report_path = write_html_report(
                path,
                out,
                title=f"{self.env.name or type(self.env).__name__} rollouts",
                tokenizer=self.env.tokenizer,
                env_name=self.env.name or type(self.env).__name__,
            )
            logger.info("HTML report: %s", self.report_path)
        except Exception:
            logger.exception("writing the HTML report failed (the JSONL %s is complete)", path)


async def process(env: EnvRuntime, n_groups: Optional[int] = None) -> None:
    """The ``process`` subcommand (``BaseEnv.process_manager``)."""
    await ProcessRunner(env, n_groups=n_groups).run()


__all__ = ["ProcessRunner", "process"]
