"""The batching inference engine: a bounded request queue and one generation worker thread.

Requests (each a list of rows: n>1 is n rows) are collected for ``batch_window_ms`` after the first one
arrives, up to ``max_batch_size`` rows, and generated together by ``generate_batch``. Weight refresh loads
the new checkpoint beside the running one, then swaps it in between batches (the batch in flight finishes
on the old weights; the next one uses the new), bumping ``weights_version``.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from atroposlib.errors import InferenceUnavailable, ModelLoadError
from atroposlib.inference.config import EngineConfig
from atroposlib.inference.generation import RowResult, generate_batch
from atroposlib.inference.loading import LoadedModel, load_causal_lm, load_model_dir
from atroposlib.inference.metrics import EngineMetrics
from atroposlib.inference.sampling import RowParams

log = logging.getLogger(__name__)


@dataclass
class _Job:
    rows: list[RowParams]
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


class InferenceEngine:
    """Owns the model and the worker thread. ``submit`` is thread-safe and never blocks."""

    def __init__(self, config: EngineConfig, metrics: Optional[EngineMetrics] = None) -> None:
        import torch

        self.config = config
        self.metrics = metrics or EngineMetrics()
        torch.set_num_threads(config.torch_threads or os.cpu_count() or 1)
        self.loaded: LoadedModel = load_model_dir(config.model_path, config.dtype, config.max_model_len)
        self.weights_version = 0
        self.metrics.weights_version.set(0)
        self._queue: queue.Queue[_Job] = queue.Queue(maxsize=config.max_queue)
        self._carry: Optional[_Job] = None
        self.adapters: dict[str, Path] = {}
        self._swap_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # -- public -------------------------------------------------------------------------------
    @property
    def tokenizer(self):
        return self.loaded.tokenizer

    @property
    def model_path(self) -> Path:
        return self.loaded.path

    @property
    def max_model_len(self) -> int:
        return self.loaded.max_model_len

    def start(self) -> InferenceEngine:
        if self._thread is None:
            self._thread = threading.Thread(target=self._worker, name="generation-worker", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def submit(self, rows: list[RowParams]) -> concurrent.futures.Future:
        """Queue rows for generation; the future resolves to ``List[RowResult]`` in row order.
        Raises ``InferenceUnavailable`` when the queue is full."""
        job = _Job(rows)
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            self.metrics.rejected.inc()
            raise InferenceUnavailable(
                f"generation queue is full ({self.config.max_queue} requests waiting); retry later"
            ) from None
        self.metrics.queue_depth.set(self._queue.qsize())
        return job.future

    def generate(self, rows: list[RowParams], timeout: Optional[float] = None) -> list[RowResult]:
        """Blocking convenience wrapper around ``submit``."""
        return self.submit(rows).result(timeout)

    def reload_weights(self, model_path: str) -> int:
        """Load weights from ``model_path`` and swap them in between batches; return the new version.
        Raises ``ModelLoadError`` (old weights stay) if the directory is bad or incompatible."""
        new_model = load_causal_lm(model_path, self.config.dtype)
        old_vocab = self.loaded.model.get_input_embeddings().weight.shape[0]
        new_vocab = new_model.get_input_embeddings().weight.shape[0]
        if new_vocab != old_vocab:
            raise ModelLoadError(
                f"model at {model_path} has vocabulary {new_vocab}, the served tokenizer needs {old_vocab}"
            )
        with self._swap_lock:
            self.loaded.model = new_model  # LoRA adapters belonged to the old base: they are dropped
            self.adapters.clear()
            self.loaded.path = Path(model_path).expanduser().resolve()
            self.weights_version += 1
            self.metrics.weights_version.set(self.weights_version)
            return self.weights_version

    def load_lora(self, name: str, path: str) -> None:
        """Load a peft LoRA adapter; requests whose ``model`` is ``name`` then use it (vLLM semantics)."""
        p = Path(path).expanduser()
        if not (p / "adapter_config.json").is_file():
            raise ModelLoadError(f"not a peft adapter directory (no adapter_config.json): {p}")
        if name in self.adapters:
            raise ModelLoadError(f"a LoRA adapter named {name!r} is already loaded; unload it first")
        from peft import PeftModel

        with self._swap_lock:
            model = self.loaded.model
            try:
                if isinstance(model, PeftModel):
                    model.load_adapter(str(p), adapter_name=name)
                else:
                    self.loaded.model = PeftModel.from_pretrained(model, str(p), adapter_name=name).eval()
            except Exception as e:
                raise ModelLoadError(f"could not load LoRA adapter from {p}: {type(e).__name__}: {e}") from e
            self.adapters[name] = p.resolve()

    def unload_lora(self, name: str) -> None:
        if name not in self.adapters:
            raise ModelLoadError(f"no LoRA adapter named {name!r} is loaded")
        with self._swap_lock:
            if len(self.adapters) == 1:  # last one: take the LoRA layers out again (nothing merged)
                self.loaded.model = self.loaded.model.unload()
            else:
                self.loaded.model.delete_adapter(name)
            del self.adapters[name]

    def queue_depth(self) -> int:
        return self._queue.qsize()

    # -- worker -------------------------------------------------------------------------------
    def _next_job(self, timeout: float) -> Optional[_Job]:
        if self._carry is not None:
            job, self._carry = self._carry, None
            return job
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def _collect(self) -> list[_Job]:
        first = self._next_job(0.1)
        if first is None:
            return []
        jobs, n_rows = [first], len(first.rows)
        deadline = time.monotonic() + self.config.batch_window_ms / 1000.0
        while n_rows < self.config.max_batch_size:
            remaining = deadline - time.monotonic()
            job = self._next_job(max(remaining, 0.0)) if remaining > 0 else self._poll()
            if job is None:
                break
            if n_rows + len(job.rows) > self.config.max_batch_size:
                self._carry = job
                break
            jobs.append(job)
            n_rows += len(job.rows)
        self.metrics.queue_depth.set(self._queue.qsize())
        return jobs

    def _poll(self) -> Optional[_Job]:
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None

    def _worker(self) -> None:
        while not self._stop.is_set():
            jobs = self._collect()
            if not jobs:
                continue
            live = [j for j in jobs if j.future.set_running_or_notify_cancel()]
            rows = [r for j in live for r in j.rows]
            try:
                results = self._run_rows(rows)
            except Exception as e:  # report to every waiting request, keep serving
                log.exception("generation batch of %d rows failed", len(rows))
                self.metrics.errors.inc()
                for j in live:
                    j.future.set_exception(e)
                continue
            pos = 0
            for j in live:
                j.future.set_result(results[pos:pos + len(j.rows)])
                pos += len(j.rows)

    def _run_rows(self, rows: list[RowParams]) -> list[RowResult]:
        # Rows for the same adapter (None = base weights) run together; results go back in row order.
        out: list[Optional[RowResult]] = [None] * len(rows)
        groups: dict[Optional[str], list[int]] = {}
        for i, r in enumerate(rows):
            groups.setdefault(r.adapter, []).append(i)
        size = self.config.max_batch_size
        for adapter, idxs in groups.items():
            for start in range(0, len(idxs), size):
                part = idxs[start:start + size]
                for i, res in zip(part, self._run_chunk([rows[i] for i in part], adapter), strict=True):
                    out[i] = res
        return [r for r in out if r is not None]

    def _run_chunk(self, chunk: list[RowParams], adapter: Optional[str]) -> list[RowResult]:
        import contextlib

        with self._swap_lock:
            lm = self.loaded
            model = lm.model
            ctx: contextlib.AbstractContextManager = contextlib.nullcontext()
            if adapter is not None:
                if adapter not in self.adapters:
                    raise ModelLoadError(f"LoRA adapter {adapter!r} was unloaded")
                model.set_adapter(adapter)
            elif self.adapters:
                ctx = model.disable_adapter()
            t0 = time.perf_counter()
            with ctx:
                res = generate_batch(model, chunk, pad_id=lm.pad_id, eos_ids=lm.eos_ids, decode=lm.decode)
            dt = time.perf_counter() - t0
        gen = sum(len(r.token_ids) for r in res)
        self.metrics.batch_size.observe(len(chunk))
        self.metrics.batch_seconds.observe(dt)
        self.metrics.generated_tokens.inc(gen)
        self.metrics.prompt_tokens.inc(sum(len(r.prompt_ids) for r in chunk))
        self.metrics.tokens_per_second.set(gen / dt if dt > 0 else 0.0)
        return res


__all__ = ["InferenceEngine"]
