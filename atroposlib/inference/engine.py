"""The batching inference engine: a bounded request queue and one generation worker thread.

Requests (each a list of rows: n>1 is n rows) are collected for ``batch_window_ms`` after the first one
arrives, up to ``max_batch_size`` rows, prefilled together and decoded as one ``DecodeBatch``. While that
batch runs, requests that arrive are admitted between decode steps as long as rows are free (continuous
batching), so a short request does not wait for the longest one in flight. All rows of one batch use the
same adapter: rows for another LoRA adapter wait until the running batch drains. A request whose rows
make their prefill fail fails alone (``_admit``: the others are prefilled without it); a fault in a
decode step, which no request can be blamed for, fails the rows of that batch.

Weight refresh loads the new checkpoint beside the running one (generation goes on meanwhile), then,
with ``refresh_mode`` ``keep`` (the default), the worker swaps it in between two decode steps: the
rows in flight go on with the new weights (the KV cache computed so far is kept, as vLLM's
``/pause?mode=keep`` and in-flight weight updates do), and nothing waits for the batch to drain. A
LoRA adapter replaced in place is swapped the same way. With ``drain`` the engine stops admitting
rows, lets the batch finish on the old weights and swaps then (generation idles while it drains).
``weights_version`` labels the weights: the version the reload names (the trainer's step), else one
more than before; every row records which version sampled which of its tokens
(``RowResult.weight_versions``), so a row generated across a refresh says both.

A job submitted with ``on_progress`` (a streaming request) is told after every decode step how far its
rows are (the callback runs on the worker thread and must be quick); ``GenerationJob.abort`` takes its
rows out of the running batch at the next step (a client that went away), finishing them as ``abort``.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from atroposlib.errors import InferenceUnavailable, ModelLoadError
from atroposlib.inference.config import EngineConfig, default_torch_threads
from atroposlib.inference.generation import DecodeBatch, RowResult
from atroposlib.inference.loading import LoadedModel, load_causal_lm, load_model_dir, local_path
from atroposlib.inference.metrics import EngineMetrics
from atroposlib.inference.sampling import RowParams

log = logging.getLogger(__name__)


#: called on the worker thread with the job's (live, still growing) results after each decode step
ProgressCallback = Callable[[Sequence[RowResult]], None]


@dataclass
class GenerationJob:
    """One submitted request: its rows, the future of its results, and how to follow or abort it."""

    rows: list[RowParams]
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    on_progress: Optional[ProgressCallback] = None
    aborted: threading.Event = field(default_factory=threading.Event)

    def abort(self) -> None:
        """Stop generating this job's rows: not started yet, it never runs; running, its rows leave the
        batch at the next step and finish with ``finish_reason`` ``"abort"``."""
        self.aborted.set()
        self.future.cancel()


_Job = GenerationJob


@dataclass
class _WorkerChange:
    """A change to the served weights, made by the worker thread between two decode steps.

    ``apply(batch)`` makes it (``batch``: the running ``DecodeBatch``, None between batches);
    ``mid_batch(adapter)`` says whether it may happen while a batch for ``adapter`` runs (else it
    waits for that batch to end). ``done`` is set once it is made (``error`` when it failed)."""

    apply: Callable[[Optional[DecodeBatch]], Any]
    mid_batch: Callable[[Optional[str]], bool]
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: Optional[BaseException] = None
    requested: float = field(default_factory=time.perf_counter)


class InferenceEngine:
    """Owns the model and the worker thread. ``submit`` is thread-safe and never blocks."""

    def __init__(self, config: EngineConfig, metrics: Optional[EngineMetrics] = None) -> None:
        import torch

        self.config = config
        self.metrics = metrics or EngineMetrics()
        torch.set_num_threads(config.torch_threads or default_torch_threads())
        self.loaded: LoadedModel = load_model_dir(
            config.model_path, config.dtype, config.max_model_len, config.device
        )
        self.weights_version = 0
        self.metrics.weights_version.set(0)
        self._queue: queue.Queue[_Job] = queue.Queue(maxsize=config.max_queue)
        self._deferred: collections.deque[_Job] = collections.deque()
        self._swap_pending = threading.Event()
        self._changes: collections.deque[_WorkerChange] = collections.deque()
        self.adapters: dict[str, Path] = {}
        self._swap_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # -- public -------------------------------------------------------------------------------
    @property
    def tokenizer(self) -> Any:
        return self.loaded.tokenizer

    @property
    def model_path(self) -> Path:
        return self.loaded.path

    @property
    def max_model_len(self) -> int:
        return self.loaded.max_model_len

    def start(self) -> InferenceEngine:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._worker, name="generation-worker", daemon=True
            )
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
        return self.submit_job(rows).future

    def submit_job(
        self, rows: list[RowParams], on_progress: Optional[ProgressCallback] = None
    ) -> GenerationJob:
        """``submit`` for a caller that follows the rows as they grow (``on_progress``, called on the
        worker thread after the prefill and every decode step) or may abort them."""
        job = _Job(rows, on_progress=on_progress)
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            self.metrics.rejected.inc()
            raise InferenceUnavailable(
                f"generation queue is full ({self.config.max_queue} requests waiting); retry later"
            ) from None
        self.metrics.queue_depth.set(self._queue.qsize())
        return job

    def generate(self, rows: list[RowParams], timeout: Optional[float] = None) -> list[RowResult]:
        """Blocking convenience wrapper around ``submit``."""
        return self.submit(rows).result(timeout)

    def set_weights_version(self, version: int) -> None:
        """Label the weights being served (vLLM's ``/update_weight_version``)."""
        self.weights_version = version
        self.metrics.weights_version.set(version)

    def reload_weights(self, model_path: str, version: Optional[int] = None) -> int:
        """Load weights from ``model_path`` and swap them in between batches; return the new version
        (``version`` when given, else the old one + 1). Raises ``ModelLoadError`` (old weights stay)
        if the directory is bad or incompatible."""
        new_model = load_causal_lm(model_path, self.config.dtype, self.config.device)
        old_vocab = self.loaded.model.get_input_embeddings().weight.shape[0]
        new_vocab = new_model.get_input_embeddings().weight.shape[0]
        if new_vocab != old_vocab:
            raise ModelLoadError(
                f"model at {model_path} has vocabulary {new_vocab}, the served tokenizer needs {old_vocab}"
            )
        path = local_path(model_path).resolve()

        def swap(batch: Optional[DecodeBatch]) -> int:
            self.loaded.model = (
                new_model  # LoRA adapters belonged to the old base: they are dropped
            )
            if batch is not None:
                batch.model = new_model
            self.adapters.clear()
            self.loaded.path = path
            self.set_weights_version(self.weights_version + 1 if version is None else version)
            return self.weights_version

        if self.config.refresh_mode == "drain" or self._thread is None:
            with self._exclusive():
                return swap(None)
        # a batch running for an adapter needs its adapter, which the new base does not have
        return int(self._on_worker(swap, mid_batch=lambda adapter: adapter is None))

    def _on_worker(
        self,
        apply: Callable[[Optional[DecodeBatch]], Any],
        mid_batch: Callable[[Optional[str]], bool],
    ) -> Any:
        """Have the worker make ``apply`` between two decode steps (``refresh_mode`` keep) and
        wait for it; its result back, its exception raised here."""
        change = _WorkerChange(apply, mid_batch)
        self._changes.append(change)
        while not change.done.wait(1.0):
            if self._stop.is_set() or self._thread is None:
                raise ModelLoadError("the engine stopped before the new weights were swapped in")
        if change.error is not None:
            raise change.error
        return change.result

    def _make_changes(self, batch: Optional[DecodeBatch], adapter: Optional[str]) -> None:
        """Worker thread: make the pending changes that may happen now."""
        kept: list[_WorkerChange] = []
        while self._changes:
            change = self._changes.popleft()
            if batch is not None and not change.mid_batch(adapter):
                kept.append(change)
                continue
            try:
                change.result = change.apply(batch)
            except BaseException as e:  # noqa: BLE001 - handed to the caller waiting for it
                change.error = e
            self.metrics.refresh_seconds.observe(time.perf_counter() - change.requested)
            if batch is not None:
                self.metrics.rows_across_refresh.inc(len(batch))
            change.done.set()
        self._changes.extendleft(reversed(kept))

    @contextlib.contextmanager
    def _exclusive(self):
        """Hold the model between batches: stop admitting rows, wait for the batch in flight to drain."""
        self._swap_pending.set()
        try:
            with self._swap_lock:
                yield
        finally:
            self._swap_pending.clear()

    def load_lora(self, name: str, path: str, version: Optional[int] = None) -> None:
        """Load a peft LoRA adapter; requests whose ``model`` is ``name`` then use it (vLLM semantics);
        ``version`` labels the served weights as the adapter goes in.

        If ``name`` is loaded already its weights are replaced in place (the server refuses that unless
        the request says ``load_inplace``): the new adapter is read and checked first, then swapped in
        between batches, so no request ever finds the name missing and a bad folder leaves the old one.
        """
        p = local_path(path)
        if not (p / "adapter_config.json").is_file():
            raise ModelLoadError(f"not a peft adapter directory (no adapter_config.json): {p}")
        from peft import PeftModel

        if name in self.adapters:
            self._replace_lora(name, p, version)
            return
        with self._exclusive():
            model = self.loaded.model
            try:
                if isinstance(model, PeftModel):
                    model.load_adapter(str(p), adapter_name=name)
                else:
                    self.loaded.model = PeftModel.from_pretrained(
                        model, str(p), adapter_name=name
                    ).eval()
            except Exception as e:
                raise ModelLoadError(
                    f"could not load LoRA adapter from {p}: {type(e).__name__}: {e}"
                ) from e
            self.adapters[name] = p.resolve()
            if version is not None:
                self.set_weights_version(version)

    def _replace_lora(self, name: str, p: Path, version: Optional[int] = None) -> None:
        from peft import PeftConfig, load_peft_weights, set_peft_model_state_dict

        model = self.loaded.model
        try:
            new_cfg = PeftConfig.from_pretrained(str(p))
            weights = load_peft_weights(str(p), device="cpu")
        except Exception as e:
            raise ModelLoadError(
                f"could not read LoRA adapter from {p}: {type(e).__name__}: {e}"
            ) from e
        old_cfg = model.peft_config[name]
        same_shape = all(
            getattr(new_cfg, k, None) == getattr(old_cfg, k, None)
            for k in ("r", "lora_alpha", "target_modules", "use_rslora", "use_dora")
        )
        if not same_shape:
            raise ModelLoadError(
                f"load_inplace needs the same rank, alpha and target modules as the loaded adapter "
                f"{name!r}; unload it first to load {p}"
            )

        def copy_in(_batch: Optional[DecodeBatch]) -> None:
            result = set_peft_model_state_dict(model, weights, adapter_name=name)
            unexpected = [k for k in getattr(result, "unexpected_keys", []) if "lora_" in k]
            if unexpected:
                raise ModelLoadError(
                    f"LoRA adapter at {p} does not fit the loaded one: {unexpected[:3]}"
                )
            self.adapters[name] = p.resolve()
            if version is not None:
                self.set_weights_version(version)

        if self.config.refresh_mode == "keep" and self._thread is not None:
            # the same model object, new adapter values: safe between two decode steps of any batch
            self._on_worker(copy_in, mid_batch=lambda adapter: True)
            return
        with self._exclusive():  # copy the new tensors into the loaded adapter between batches
            copy_in(None)

    def unload_lora(self, name: str) -> None:
        if name not in self.adapters:
            raise ModelLoadError(f"no LoRA adapter named {name!r} is loaded")
        with self._exclusive():
            if len(self.adapters) == 1:  # last one: take the LoRA layers out again (nothing merged)
                self.loaded.model = self.loaded.model.unload()
            else:
                self.loaded.model.delete_adapter(name)
            del self.adapters[name]

    def queue_depth(self) -> int:
        return self._queue.qsize()

    # -- worker -------------------------------------------------------------------------------
    def _take(self, timeout: Optional[float]) -> Optional[_Job]:
        if self._deferred:
            return self._deferred.popleft()
        try:
            return self._queue.get(timeout=timeout) if timeout else self._queue.get_nowait()
        except queue.Empty:
            return None

    def _collect(self) -> list[_Job]:
        """Block briefly for a first request, then gather more for the batch window."""
        first = self._take(0.1)
        if first is None:
            return []
        jobs, n_rows = [first], len(first.rows)
        deadline = time.monotonic() + self.config.batch_window_ms / 1000.0
        while n_rows < self.config.max_batch_size:
            remaining = deadline - time.monotonic()
            job = self._take(remaining if remaining > 0 else None)
            if job is None:
                break
            if n_rows + len(job.rows) > self.config.max_batch_size or _adapter(job) != _adapter(
                first
            ):
                self._deferred.appendleft(job)
                break
            jobs.append(job)
            n_rows += len(job.rows)
        self.metrics.queue_depth.set(self._queue.qsize())
        return jobs

    def _admissible(self, free: int, adapter: Optional[str]) -> list[_Job]:
        """Jobs that fit into ``free`` rows of a running batch for ``adapter`` (non-blocking)."""
        jobs: list[_Job] = []
        while free > 0 and not self._swap_pending.is_set():
            job = self._take(None)
            if job is None:
                break
            if len(job.rows) > free or _adapter(job) != adapter:
                self._deferred.appendleft(job)
                break
            jobs.append(job)
            free -= len(job.rows)
        return jobs

    def _worker(self) -> None:
        while not self._stop.is_set():
            if (
                self._swap_pending.is_set()
            ):  # a weight swap is waiting for the lock: let it go first
                time.sleep(0.002)
                continue
            if self._changes:
                with self._swap_lock:
                    self._make_changes(None, None)
            jobs = self._collect()
            if not jobs:
                continue
            with self._swap_lock:
                self._run_batch(jobs)
                if self._changes:  # what had to wait for this batch's adapter
                    self._make_changes(None, None)

    def _run_batch(self, jobs: list[_Job]) -> None:
        lm = self.loaded
        adapter = _adapter(jobs[0])
        model = lm.model
        ctx: contextlib.AbstractContextManager = contextlib.nullcontext()
        live: list[tuple[_Job, list[RowResult]]] = []
        try:
            if adapter is not None:
                if adapter not in self.adapters:
                    raise ModelLoadError(f"LoRA adapter {adapter!r} is not loaded")
                model.set_adapter(adapter)
            elif self.adapters:
                ctx = model.disable_adapter()
            t0 = time.perf_counter()
            with ctx:
                batch = DecodeBatch(model, pad_id=lm.pad_id, eos_ids=lm.eos_ids, decode=lm.decode)
                merge_ok = True
                while jobs:
                    jobs = [j for j in jobs if j.future.set_running_or_notify_cancel()]
                    admitted = self._admit(batch, jobs)
                    jobs = []
                    live += admitted
                    finished = sum(r.done for _, results in admitted for r in results)
                    self.metrics.batch_size.observe(len(batch) + finished)
                    self._note_version(live)
                    live = self._deliver(live)
                    merge_ok = merge_ok and batch.can_merge()
                    while len(batch):
                        batch.step()
                        self._drop_aborted(batch, live)
                        self._note_version(live)
                        live = self._deliver(live)
                        if self._changes and len(batch):
                            self._make_changes(batch, adapter)
                        if merge_ok and len(batch) < self.config.max_batch_size:
                            jobs = self._admissible(
                                self.config.max_batch_size - len(batch), adapter
                            )
                            if jobs:
                                break
            dt = time.perf_counter() - t0
            self.metrics.batch_seconds.observe(dt)
            self.metrics.generated_tokens.inc(batch.generated)
            self.metrics.tokens_per_second.set(batch.generated / dt if dt > 0 else 0.0)
            self._deliver(live)
        except Exception as e:  # report to every waiting request of this batch, keep serving
            log.exception("generation batch failed")
            self.metrics.errors.inc()
            for j, _ in live:
                if not j.future.done():
                    j.future.set_exception(e)
            for j in jobs:
                if not j.future.done():
                    j.future.set_exception(e)

    def _admit(self, batch: DecodeBatch, jobs: list[_Job]) -> list[tuple[_Job, list[RowResult]]]:
        """Prefill ``jobs`` into ``batch`` together; if that fails, each alone, so that a job whose
        own rows make the prefill fail fails by itself and the others (and the rows already in
        the batch, which a failed prefill leaves as they were) go on. Returns the jobs admitted
        with their (live) results."""
        rows = [r for j in jobs for r in j.rows]
        if not rows:
            return []
        try:
            results = batch.add(rows)
        except Exception as e:
            failure: Optional[Exception] = e
        else:
            failure = None
        if failure is not None:  # handled outside the except: the retries' errors chain nothing
            if len(jobs) == 1:
                self._fail_job(jobs[0], failure)
                return []
            log.warning(
                "a prefill of %d requests together failed; prefilling each alone", len(jobs)
            )
            return [admitted for j in jobs for admitted in self._admit(batch, [j])]
        self.metrics.prompt_tokens.inc(sum(len(r.prompt_ids) for r in rows))
        out, pos = [], 0
        for j in jobs:
            out.append((j, results[pos : pos + len(j.rows)]))
            pos += len(j.rows)
        return out

    def _fail_job(self, job: _Job, error: BaseException) -> None:
        """One request's rows failed: log it once (with the traceback), answer it alone."""
        log.error(
            "generation failed for one request (%d rows); the batch goes on",
            len(job.rows),
            exc_info=error,
        )
        self.metrics.errors.inc()
        if not job.future.done():
            job.future.set_exception(error)

    def _note_version(self, live: list[tuple[_Job, list[RowResult]]]) -> None:
        """The tokens just generated came from the weights being served now."""
        for _, results in live:
            for r in results:
                r.note_version(self.weights_version)

    def _drop_aborted(self, batch: DecodeBatch, live: list[tuple[_Job, list[RowResult]]]) -> None:
        for job, results in live:
            if job.aborted.is_set():
                running = [r for r in results if not r.done]
                if running:
                    batch.drop(running)
                    self.metrics.aborted.inc(len(running))

    @staticmethod
    def _deliver(live: list[tuple[_Job, list[RowResult]]]) -> list[tuple[_Job, list[RowResult]]]:
        """Tell followers how far their rows are, resolve the futures of jobs whose rows are all done;
        return the rest."""
        rest = []
        for job, results in live:
            if job.on_progress is not None:
                try:
                    job.on_progress(results)
                except Exception:  # a follower's bug must not fail the batch
                    log.exception("progress callback failed")
            if all(r.done for r in results):
                job.future.set_result(results)
            else:
                rest.append((job, results))
        return rest


def _adapter(job: _Job) -> Optional[str]:
    return job.rows[0].adapter if job.rows else None


__all__ = ["GenerationJob", "InferenceEngine", "ProgressCallback"]
