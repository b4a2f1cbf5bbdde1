"""Scoring samples off the event loop, each within a time limit (``BaseEnv.score_samples``).

    scores = await self.score_samples(partial(score_reply, item=item), replies)
    verdicts = await self.score_samples(verify_math_answer, pairs, processes=True)

``fn`` is called once per sample, concurrently: a coroutine function on the event loop, a plain
function in its own thread (at most ``--env.score_workers`` at a time), or, with
``processes=True`` (CPU-bound scorers such as math-verify or sympy, which would hold the GIL), in
a pool of at most ``--env.score_workers`` worker processes (``fn`` and the samples must then
pickle: a module-level function, ``functools.partial`` of one). Each sample gets ``--env.score_timeout`` seconds. A
sample whose scoring times out, raises, or returns None gets None: no score, which the group
builder turns into ``reward_status: "unavailable"`` for that sample (never a 0), and which is
counted by kind (``timeout``, ``error: ValueError``, ``no score``) in the step metrics
(``scoring/unavailable_<kind>``) and the ``process`` summary; the first of each kind is logged
(an exception with its traceback). Nothing else waits for it: the other samples, and every other
rollout of the env, go on.

A thread cannot be stopped: one past its limit is abandoned (it runs on in the background,
counted in ``scoring/abandoned_threads`` until it ends). A worker process past its limit is killed
and replaced, so scorers that can hang belong in processes. Worker processes start from a fork
server (clean, without the env's threads; it imports the env's main module, so an env file keeps
its work under ``if __name__ == "__main__":``, as every env file does) and are stopped with the
run (``close``). Starting a worker and loading the function into it (importing its module) does
not count against a sample's limit; it has ``STARTUP_LIMIT`` seconds.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import multiprocessing
import pickle
import threading
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Optional, TypeVar

logger = logging.getLogger(__name__)

S = TypeVar("S")
T = TypeVar("T")

KIND_TIMEOUT = "timeout"
KIND_NO_SCORE = "no score"


# Internal: raised and caught in this module (SampleScorer counts it as the sample's error).
class _Failed(Exception):
    """A sample's scoring failed in a worker process: the exception's type, message, traceback."""

    def __init__(self, type_name: str, message: str, trace: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name, self.trace = type_name, trace


STARTUP_LIMIT = 120.0
"""Seconds a worker process may take to start and load a scoring function (importing its module),
which does not count against the samples' limit."""


def _error_reply(e: BaseException) -> tuple[str, str, str, str]:
    return ("error", type(e).__name__, str(e)[:300], traceback.format_exc())


def _worker_main(conn: Connection) -> None:
    """A worker process: ``("load", fn)`` sets the function (importing its module), ``("run",
    sample)`` scores one sample; each is answered ``("ok", value)`` or ``("error", ...)``."""
    fn: Optional[Callable[[Any], Any]] = None
    reply: tuple[Any, ...]
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            kind, payload = pickle.loads(data)
            if kind == "load":
                fn, reply = payload, ("ok", None)
            else:
                assert fn is not None, "no scoring function loaded"
                reply = ("ok", fn(payload))
        except BaseException as e:  # noqa: BLE001 - reported to the env's process, whatever it is
            reply = _error_reply(e)
        try:
            conn.send(reply)
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            conn.send(("error", "UnpicklableResult", str(e)[:300], ""))


class _Worker:
    """One worker process, the parent's end of its pipe, and the function it has loaded."""

    def __init__(self, context: Any) -> None:
        self.conn, child = context.Pipe()
        self.proc = context.Process(target=_worker_main, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.loaded: Optional[bytes] = None

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


def _dumps(message: tuple[str, Any]) -> bytes:
    try:
        return pickle.dumps(message)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise TypeError(
            "score_samples(processes=True) needs a picklable function and samples "
            f"(a module-level function, or functools.partial of one): {e}"
        ) from None


async def _readable(conn: Connection, timeout: float) -> bool:
    """Whether ``conn`` has something to read (an answer, or EOF) within ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    fd = conn.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await asyncio.wait_for(ready, timeout)
        return True
    except asyncio.TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)


async def _ask(worker: _Worker, message: bytes, timeout: float) -> Any:
    """Send one message, wait at most ``timeout`` seconds for the answer (``asyncio.TimeoutError``
    past it), return its value or raise ``_Failed``."""
    worker.conn.send_bytes(message)
    if not await _readable(worker.conn, timeout):
        raise asyncio.TimeoutError
    try:
        reply = worker.conn.recv()
    except EOFError:
        raise _Failed("WorkerDied", "the scoring process exited", "") from None
    if reply[0] == "ok":
        return reply[1]
    raise _Failed(reply[1], reply[2], reply[3])


class _ProcessPool:
    """Worker processes started on demand (at most ``size``), reused, killed when they time out."""

    def __init__(self, size: int) -> None:
        methods = multiprocessing.get_all_start_methods()
        self.context = multiprocessing.get_context(
            "forkserver" if "forkserver" in methods else "spawn"
        )
        self.idle: list[_Worker] = []
        self.busy: set[_Worker] = set()
        self.size = size

    async def run(self, fn: Callable[[Any], Any], sample: Any, timeout: float) -> Any:
        load, run = _dumps(("load", fn)), _dumps(("run", sample))
        # starting one (the first also starts the fork server) runs off the event loop
        worker = self.idle.pop() if self.idle else await asyncio.to_thread(_Worker, self.context)
        self.busy.add(worker)
        healthy = False
        try:
            if worker.loaded != load:
                worker.loaded = None
                try:
                    await _ask(worker, load, STARTUP_LIMIT)
                except asyncio.TimeoutError:
                    raise _Failed(
                        "WorkerStart", f"no scoring process ready in {STARTUP_LIMIT:g}s", ""
                    ) from None
                worker.loaded = load
            try:
                value = await _ask(worker, run, timeout)
            except _Failed as e:
                healthy = e.type_name != "WorkerDied"  # the sample failed, the worker is fine
                raise
            healthy = True
            return value
        finally:
            self.busy.discard(worker)
            if healthy:
                self.idle.append(worker)
            else:
                worker.kill()

    def close(self) -> None:
        for worker in [*self.idle, *self.busy]:
            worker.kill()
        self.idle, self.busy = [], set()


@dataclass
class SampleScorer:
    """An env's scoring: the limits, the process pool (made on first use) and the counts."""

    timeout: float
    workers: int
    failures: Counter[str] = field(default_factory=Counter)
    scored: int = 0
    abandoned_threads: int = 0
    _pool: Optional[_ProcessPool] = None
    _limit: Optional[asyncio.Semaphore] = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def score(
        self,
        fn: Callable[[S], Any],
        samples: Sequence[S],
        processes: bool = False,
    ) -> list[Any]:
        """``fn(sample)`` for every sample, concurrently, each within the time limit (see the
        module docstring); None where a sample has no score."""
        if self._limit is None:
            self._limit = asyncio.Semaphore(self.workers)
        is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "func", None)
        )
        run = self._on_loop if is_async else self._in_process if processes else self._in_thread
        return list(await asyncio.gather(*(self._one(run, fn, s) for s in samples)))

    async def _one(self, run: Callable[..., Awaitable[Any]], fn: Any, sample: Any) -> Any:
        start = time.monotonic()
        try:
            value = await run(fn, sample)
        except asyncio.TimeoutError:
            self._count(KIND_TIMEOUT, f"no score within --env.score_timeout {self.timeout:g}s")
            return None
        except TypeError as e:
            if "needs a picklable function" in str(e):
                raise  # a bug of the env, not of one sample
            self._count(f"error: {type(e).__name__}", str(e), e)
            return None
        except _Failed as e:
            self._count(f"error: {e.type_name}", f"{e}\n{e.trace}".strip())
            return None
        except Exception as e:  # noqa: BLE001 - counted and logged once per kind, never fatal
            self._count(f"error: {type(e).__name__}", str(e), e)
            return None
        if value is None:
            self._count(KIND_NO_SCORE, "the scoring function returned None")
            return None
        self.scored += 1
        logger.debug("scored a sample in %.3fs", time.monotonic() - start)
        return value

    def _count(self, kind: str, detail: str, exc: Optional[BaseException] = None) -> None:
        first = kind not in self.failures
        self.failures[kind] += 1
        if first:
            logger.warning(
                "a sample could not be scored (%s): %s; its reward is unavailable (not 0). Further "
                "samples of this kind are counted (scoring/unavailable_*), not logged",
                kind,
                detail,
                exc_info=exc,
            )

    async def _on_loop(self, fn: Callable[[Any], Awaitable[Any]], sample: Any) -> Any:
        return await asyncio.wait_for(fn(sample), self.timeout)

    async def _in_thread(self, fn: Callable[[Any], Any], sample: Any) -> Any:
        assert self._limit is not None
        async with self._limit:
            loop = asyncio.get_running_loop()
            answer: asyncio.Future[tuple[bool, Any]] = loop.create_future()

            def deliver(outcome: tuple[bool, Any]) -> None:
                if not answer.done():
                    answer.set_result(outcome)

            state = {"finished": False, "abandoned": False}

            def work() -> None:
                try:
                    outcome: tuple[bool, Any] = (True, fn(sample))
                except BaseException as e:  # noqa: BLE001 - handed back to the event loop
                    outcome = (False, e)
                with self._lock:
                    state["finished"] = True
                    if state["abandoned"]:
                        self.abandoned_threads -= 1
                try:
                    loop.call_soon_threadsafe(deliver, outcome)
                except RuntimeError:  # the loop has closed: nobody waits any more
                    pass

            threading.Thread(target=work, name="score-sample", daemon=True).start()
            try:
                ok, value = await asyncio.wait_for(answer, self.timeout)
            except asyncio.TimeoutError:
                with self._lock:
                    if not state["finished"]:
                        state["abandoned"] = True
                        self.abandoned_threads += 1
                raise
            if not ok:
                raise value
            return value

    async def _in_process(self, fn: Callable[[Any], Any], sample: Any) -> Any:
        assert self._limit is not None
        async with self._limit:
            if self._pool is None:
                self._pool = _ProcessPool(self.workers)
            return await self._pool.run(fn, sample, self.timeout)

    def metrics(self) -> dict[str, float]:
        """``scoring/unavailable`` (total) and one ``scoring/unavailable_<kind>`` per kind seen."""
        out = {"scoring/unavailable": float(sum(self.failures.values()))}
        for kind, n in self.failures.items():
            out[f"scoring/unavailable_{kind.replace(': ', '_').replace(' ', '_')}"] = float(n)
        if self.abandoned_threads:
            out["scoring/abandoned_threads"] = float(self.abandoned_threads)
        return out

    def summary(self) -> str:
        """``"2 sample(s) without a score (timeout: 1, error: ValueError: 1)"`` or ``""``."""
        if not self.failures:
            return ""
        kinds = ", ".join(f"{k}: {n}" for k, n in self.failures.most_common())
        return f"{sum(self.failures.values())} sample(s) without a score ({kinds})"

    def close(self) -> None:
        """Stop the worker processes (abandoned threads end on their own)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


__all__ = ["KIND_NO_SCORE", "KIND_TIMEOUT", "SampleScorer"]
