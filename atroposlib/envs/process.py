"""The ``process`` subcommand: make N groups locally, no trajectory API.

Items run concurrently (at most ``max_num_workers`` at once); each finished group is validated and
appended (flushed) to ``data_path_to_save_groups``; a tqdm bar shows groups done, mean score and rate.
At the end, or on Ctrl-C / SIGTERM, the JSONL is complete up to the last finished group and a
self-contained HTML report of it is written next to it (``<name>.html``).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from pathlib import Path
from typing import Any, Optional

from atroposlib.envs.metrics_logger import make_metrics_logger

logger = logging.getLogger(__name__)


class ProcessRunner:
    def __init__(self, env: Any, n_groups: Optional[int] = None, progress: bool = True) -> None:
        self.env = env
        self.n_groups = n_groups if n_groups is not None else env.config.total_steps
        self.progress = progress
        self.stop = asyncio.Event()
        self.done = 0
        self.attempted = 0
        self.failed = 0
        self.hook_errors = 0
        self.scores: list[float] = []
        self.report_path: Optional[Path] = None
        self.exhausted = False

    async def run(self) -> None:
        env = self.env
        if env.jsonl_writer is None:
            raise ValueError("process needs --env.data_path_to_save_groups")
        self._install_signals()
        env.process_mode = True  # Atropos names, read by some envs
        env.n_groups_to_process = self.n_groups
        env.group_size_to_process = env.config.group_size
        env.metrics_logger = make_metrics_logger(
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
            env.jsonl_writer.close()
            self._write_report()
            await env.server.close()
            env.metrics_logger.finish()
        logger.info(
            "process: %d group(s) written to %s (%d attempt(s) gave no group, %d hook error(s))",
            self.done,
            env.jsonl_writer.path,
            self.failed,
            self.hook_errors,
        )

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
        env = self.env
        concurrency = max(1, env.max_num_workers)
        max_attempts = max(self.n_groups * 5, self.n_groups + 10)
        bar = self._bar()
        start = time.monotonic()
        running: set = set()
        stop_wait = asyncio.ensure_future(self.stop.wait())
        try:
            while not self.stop.is_set():
                while (
                    len(running) < concurrency
                    and self.done + len(running) < self.n_groups
                    and self.attempted < max_attempts
                    and not self.exhausted
                ):
                    item = env.backlog.pop() if env.backlog else await env.get_next_item()
                    if item is None:
                        self.exhausted = True
                        break
                    self.attempted += 1
                    running.add(asyncio.ensure_future(self._one(item)))
                if not running:
                    break
                finished, running = await asyncio.wait(
                    running | {stop_wait}, return_when=asyncio.FIRST_COMPLETED
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
            if self.stop.is_set():
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

    async def _one(self, item: Any) -> None:
        env = self.env
        try:
            groups, backlog = await env.collect_trajectories(item)
            env.backlog.extend(backlog or [])
            if groups:
                groups = await env.postprocess_histories(groups)
            written = []
            if groups:
                room = self.n_groups - self.done
                items = groups if isinstance(groups, list) else [groups]
                written = await env.handle_send_to_api(
                    items[: max(room, 0)],
                    item,
                    do_send_to_api=False,
                    abort_on_any_max_length_exceeded=False,
                )
            if not written:
                self.failed += 1
            for g in written:
                self.done += 1
                self.scores.extend(g["scores"])
            if written:
                await self._log_metrics()
        except asyncio.CancelledError:
            raise
        except Exception:
            self.hook_errors += 1
            self.failed += 1
            logger.exception("an env hook raised while processing an item")

    async def _log_metrics(self) -> None:
        """Atropos calls ``wandb_log`` after every processed group, with the group count as step."""
        env = self.env
        step, env.curr_step = env.curr_step, self.done
        try:
            await env.wandb_log({})
        except Exception:
            self.hook_errors += 1
            logger.exception("wandb_log() raised")
        finally:
            env.curr_step = step

    def _bar(self):
        if not self.progress:
            return None
        from tqdm import tqdm

        return tqdm(
            total=self.n_groups,
            desc=f"{self.env.name or type(self.env).__name__} groups",
            unit="group",
        )

    def _write_report(self) -> None:
        path = Path(self.env.jsonl_writer.path)
        try:
            from atroposlib.frontend.report import write_html_report
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
            )
            logger.info("HTML report: %s", self.report_path)
        except Exception:
            logger.exception("writing the HTML report failed (the JSONL %s is complete)", path)


__all__ = ["ProcessRunner"]
