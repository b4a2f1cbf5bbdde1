"""How the inference servers get the trainer's new weights: one small strategy object per mode.

* ``restart`` (Atropos's path): the trainer owns the server process; every ``vllm_restart_interval`` steps it
  saves the model and relaunches the server on it (``inference_command`` with ``{model_path}``/``{port}``
  and optionally ``{python}``/``{served_name}``/``{seq_len}``; by default vLLM's OpenAI server run by
  ``inference_python``, with GPU flags only where CUDA is present; our CPU engine with
  ``{python} -m atroposlib.cli.serve_model``).
* ``reload``: save, then load the folder into each running server without a restart: our engine and
  SGLang through ``/update_weights_from_disk``, vLLM through its dev-mode routes and atroposlib's worker
  extension. Servers keep their sockets, so envs see no dropped connection.
* ``lora``: the trained model is a peft LoRA wrapper; only the adapter is saved and hot-loaded under one
  stable name (``lora_adapter_name``), published before the first rollout (also on resume) and then
  replaced in place (``load_inplace``), so the name never 404s.
* ``none``: weights stay where they are (evaluation runs, or servers refreshed by someone else).

Which routes a server takes is its backend's business: the strategies ask
``atroposlib.inference_clients.registry`` for the ``weight_routes`` of the server type (``inference_server``,
or what ``probe_server_type`` finds when it is ``auto``).

Each refresh returns the policy version (the trainer step) it published, plus what the server reported
(``weights_version`` for our engine) together with the step whose weights that report is about
(``weights_version_step``): with ``async_refresh`` the push of step N is still in flight when step N's
metrics row is written, so that row carries the newest *completed* push's report (step N - interval),
and the push's own log line gives its version when it lands.
"""

from __future__ import annotations

import gc
import logging
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

import httpx

from atroposlib.errors import ConfigError, InferenceError
from atroposlib.inference.vllm_launch import find_vllm_python, vllm_server
from atroposlib.inference_clients.registry import probe_server_type, weight_routes
from atroposlib.inference_clients.weight_routes import WeightRoutes
from atroposlib.utils.net import wait_for_http
from atroposlib.utils.procs import group_members, signal_group

from .checkpoint import save_model_folder, weights_bytes
from .config import TrainingConfig
from .device_memory import GIB, DeviceMemory, utilization_in, wait_until_it_fits

log = logging.getLogger(__name__)
# how long a server that took a push may stay unreachable (a supervised restart) before a push fails
UNREACHABLE_GRACE_S = 600.0


class WeightRefresh:
    """Base strategy: ``prepare_model`` may wrap the model; ``start`` runs once; ``refresh`` per interval."""

    mode = "none"

    def __init__(self, cfg: TrainingConfig, publish_dtype: Any = None) -> None:
        self.cfg = cfg
        self.urls = cfg.resolved_inference_urls()
        self.weights_root = Path(cfg.save_path) / "weights"
        self._kinds: dict[str, str] = {}
        # the dtype full weights are published in (None: as the model holds them); see publish_dtype
        self.publish_dtype = publish_dtype
        self.last_saved_bytes: Optional[int] = None
        self._written: list[str] = []  # weight folders this trainer wrote, oldest first
        self._unlabelled: set[str] = set()  # servers that cannot label their weights

    def http_client(self, timeout: float) -> httpx.Client:
        """A client for the inference servers, sending the trainer's key (``inference_api_key``)
        when one is set."""
        key = self.cfg.inference_api_key
        return httpx.Client(
            timeout=timeout, headers={"Authorization": f"Bearer {key}"} if key else {}
        )

    def prepare_model(self, model: Any, resume_from: Optional[str] = None) -> Any:
        """Wrap the freshly loaded model if the mode needs it (``resume_from``: a checkpoint folder)."""
        return model

    def start(self, model_path: str, step: int = 0) -> None:
        """Called once before the first step, with the weights the run starts from (those of
        trainer step ``step``: 0, or the checkpoint's on resume)."""

    def refresh(
        self, step: int, model: Any, tokenizer: Any, state_dict: Any = None
    ) -> dict[str, Any]:
        return {"policy_version": step}

    def close(self) -> None:
        """Release what ``start`` acquired."""

    # helpers ----------------------------------------------------------------------------
    def _kind(self, http: httpx.Client, url: str) -> str:
        """The server type at ``url``: ``inference_server``, or asked once when it is ``auto``."""
        if self.cfg.inference_server != "auto":
            return self.cfg.inference_server
        if url not in self._kinds:
            self._kinds[url] = probe_server_type(http, url.rstrip("/"))
            log.info("%s: inference server at %s is %s", self.mode, url, self._kinds[url])
        return self._kinds[url]

    def _routes(self, http: httpx.Client, url: str) -> WeightRoutes:
        """The weight routes of the server at ``url``."""
        return weight_routes(self._kind(http, url))

    def _label(self, http: httpx.Client, step: int) -> None:
        """Label the weights every server holds now as trainer step ``step`` (at start, after a
        restart), so its completions report the version that generated them; a server that cannot
        is said once (its groups' policy versions are then the envs' estimates)."""
        for url in self.urls:
            try:
                ok = self._routes(http, url).label(http, url.rstrip("/"), step)
            except ConfigError:  # a server none of our backends knows: it cannot be labelled
                ok = False
            except InferenceError as e:
                log.warning(
                    "%s: could not label %s's weights as step %d: %s", self.mode, url, step, e
                )
                continue
            if not ok and url not in self._unlabelled:
                self._unlabelled.add(url)
                log.warning(
                    "%s: %s cannot label its weights (vLLM needs VLLM_SERVER_DEV_MODE=1; an unknown server cannot): the policy "
                    "versions of its completions are the envs' estimates",
                    self.mode,
                    url,
                )

    def _save(
        self,
        step: int,
        model: Any,
        tokenizer: Any,
        state_dict: Any = None,
        name: str = "",
        dtype: Any = None,
    ) -> Path:
        """Save the weights to publish (``dtype``: cast to it, e.g. the publish dtype) and log their
        size: ``last_saved_bytes``, the refresh metrics' ``refresh_mib``."""
        self.weights_root.mkdir(parents=True, exist_ok=True)
        out = save_model_folder(
            model, tokenizer, self.weights_root / (name or f"step_{step:07d}"), state_dict, dtype
        )
        self.last_saved_bytes = weights_bytes(out)
        log.info(
            "%s: step %d's weights saved, %.1f MiB%s",
            self.mode,
            step,
            self.last_saved_bytes / 2**20,
            f" in {_dtype_name(dtype)}" if dtype is not None else "",
        )
        # keep this one and the one this trainer wrote before it (a server may still be reading
        # it); any other is older or an earlier life's (a resumed run writes lower steps again)
        keep = {out.name, *self._written[-1:]}
        self._written = [*self._written[-1:], out.name]
        for old in self.weights_root.glob("step_*"):
            if old.is_dir() and old.name not in keep:
                shutil.rmtree(old, ignore_errors=True)
        return out


class NoRefresh(WeightRefresh):
    mode = "none"


class BackgroundLoad:
    """At most one server load in flight, beside the next training step (``enabled``), or none.

    ``run`` starts a load (first waiting for the one before, whose failure it re-raises: a failed load
    surfaces one step later, never silently); disabled, it runs the load before returning. Shared by
    ``reload`` (``async_refresh``) and ``lora`` (``async_lora_load``)."""

    def __init__(self, enabled: bool) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1) if enabled else None
        self._pending: Optional[Future] = None

    def wait(self) -> None:
        """Block until the load in flight (if any) has landed; re-raise its failure here."""
        if self._pending is not None:
            fut, self._pending = self._pending, None
            fut.result()

    def run(self, load: Callable[..., object], *args: Any) -> None:
        self.wait()
        if self._pool is not None:
            self._pending = self._pool.submit(load, *args)
        else:
            load(*args)

    def close(self) -> None:
        try:
            self.wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)


class ReloadRefresh(WeightRefresh):
    """Save, then ask every server to load the folder in place (our engine, SGLang, vLLM).

    With ``async_refresh`` (the default) the save happens at once (the weights are snapshotted before the
    next optimizer step) and the POSTs run in a background thread while the trainer pulls and trains the
    next batch; the next refresh (or ``close``) waits for them first, so at most one is in flight and
    failures surface one step later, never silently.
    """

    mode = "reload"

    def __init__(self, cfg: TrainingConfig, timeout: float = 120.0) -> None:
        super().__init__(cfg)
        self._http = self.http_client(timeout)
        self._loads = BackgroundLoad(cfg.async_refresh)
        # the newest completed push: (trainer step of its weights, first server's version, seconds)
        self._done: Optional[tuple[int, Any, float]] = None
        self.last_push_s: Optional[float] = None
        self._reached: set[str] = set()  # servers that took a push
        self._unreachable: dict[str, float] = {}  # server -> when it first could not be reached

    def start(self, model_path: str, step: int = 0) -> None:
        for url in self.urls:  # best effort: learn each server's type while all are up
            try:
                self._kind(self._http, url)
                if self.cfg.inference_server == "auto":  # it answered the probe
                    self._reached.add(url)
            except InferenceError:
                pass  # not up yet: the first push asks again (and fails if it never answers)
        if self.cfg.resume:  # the servers may still hold older weights than the checkpoint
            self._push(model_path, step)
        elif self._reached:
            self._label(self._http, step)

    def _push_one(self, url: str, path: str, step: int) -> Optional[Any]:
        """Load ``path`` into the server at ``url``. A server that answered before (an earlier push, or
        this one until it died mid-request) and cannot be reached now (restarted by its supervisor
        after a crash) is skipped with a warning for up to ``UNREACHABLE_GRACE_S``: it starts on the
        run's model and gets the weights at the next push. A server never reached fails the push."""
        try:
            version = self._routes(self._http, url).reload_from_disk(
                self._http, url.rstrip("/"), path, step
            )
        except InferenceError as e:
            cause = e.__cause__
            if not isinstance(cause, httpx.TransportError):
                raise
            # never answered at all (a wrong URL): fail now; answered, or died mid-request: a restart
            never = isinstance(cause, (httpx.ConnectError, httpx.ConnectTimeout))
            if never and url not in self._reached:
                raise
            self._reached.add(url)
            since = self._unreachable.setdefault(url, time.monotonic())
            if time.monotonic() - since > UNREACHABLE_GRACE_S:
                raise
            log.warning(
                "reload: %s is unreachable (restarting?); it gets step %d's weights at the next "
                "refresh: %s",
                url,
                step,
                e,
            )
            return None
        self._reached.add(url)
        self._unreachable.pop(url, None)
        return version

    def _push(self, path: str, step: int) -> list[Any]:
        t0 = time.perf_counter()
        versions = [v for url in self.urls if (v := self._push_one(url, path, step)) is not None]
        self.last_push_s = time.perf_counter() - t0
        self._done = (step, versions[0] if versions else None, self.last_push_s)
        log.info(
            "reload: step %d's weights loaded by %d server(s), weights_version %s (%.2f s)",
            step,
            len(versions),
            ", ".join(str(v) for v in versions) or "-",
            self.last_push_s,
        )
        return versions

    def refresh(
        self, step: int, model: Any, tokenizer: Any, state_dict: Any = None
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        self._loads.wait()  # the previous push, before its folder can be rotated away
        path = str(
            self._save(step, model, tokenizer, state_dict, dtype=self.publish_dtype).resolve()
        )
        self._loads.run(self._push, path, step)
        # synchronous: this step's push; async: the newest one that has completed (None before any)
        done_step, version, push_s = self._done if self._done is not None else (None, None, None)
        return {
            "policy_version": step,
            "weights_version": version,
            "weights_version_step": done_step,
            "refresh_s": time.perf_counter() - t0,
            "reload_push_s": push_s,
            "refresh_mib": _mib(self.last_saved_bytes),
            "server_load_s": push_s,  # the newest completed push (async: it overlapped a step)
        }

    def close(self) -> None:
        try:
            self._loads.close()
        finally:
            self._http.close()


class RestartRefresh(WeightRefresh):
    """The trainer launches the inference server and relaunches it on each new checkpoint."""

    mode = "restart"

    def __init__(self, cfg: TrainingConfig) -> None:
        super().__init__(cfg)
        self.python = cfg.inference_python or find_vllm_python() or sys.executable
        self.env: Optional[dict[str, str]] = None
        if cfg.inference_command is not None:
            self.command: str = cfg.inference_command
        else:  # vLLM's OpenAI server, launched the way this machine needs
            server = vllm_server(
                "{model_path}",
                0,
                python="{python}",
                served_name="{served_name}",
                max_model_len=cfg.seq_len,
                dev_mode=True,  # its weights can be labelled with the step (weights versions)
            )
            server.argv[server.argv.index("--port") + 1] = "{port}"
            self.command = " ".join(server.argv)
            self.env = server.full_env()
        for needed in ("{model_path}", "{port}"):
            if needed not in self.command:
                raise ConfigError(f"inference_command must contain {needed} (got {self.command!r})")
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log_path = Path(cfg.save_path) / "inference_server.log"
        # the GPU the server shares with the trainer (None: nothing to check, e.g. a CPU run)
        self.memory: Optional[DeviceMemory] = None
        self.memory_wait_s: Optional[float] = None  # the last launch's wait for room

    def _make_room(self, cmd: str) -> None:
        """Before a launch on a GPU shared with the trainer: wait until the server's claim
        (``--gpu-memory-utilization`` x total) is free, or end the run with one line."""
        _release_accelerator_memory()
        if self.memory is None:
            return
        utilization = utilization_in(cmd)
        if utilization is None:
            log.info(
                "restart: the inference command names no --gpu-memory-utilization; free memory on "
                "%s is not checked before the launch",
                self.memory.name,
            )
            return
        free, self.memory_wait_s = wait_until_it_fits(
            self.memory,
            utilization,
            self.cfg.inference_memory_wait_s,
            release=_release_accelerator_memory,
            log=log,
        )
        log.info(
            "restart: %.1f GiB free on %s for a server claiming %g of it (waited %.1f s)",
            free / GIB,
            self.memory.name,
            utilization,
            self.memory_wait_s,
        )

    def _launch(self, model_path: str, step: int) -> None:
        """Start the server on ``model_path`` (trainer step ``step``'s weights) and label them."""
        cmd = self.command.format(
            model_path=shlex.quote(model_path),
            port=self.cfg.vllm_port,
            served_name=shlex.quote(self.cfg.model_name),
            seq_len=self.cfg.seq_len,
            python=shlex.quote(self.python),
        )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._make_room(cmd)
        logf = open(self.log_path, "ab")
        log.info("starting inference server: %s", cmd)
        try:
            self.proc = subprocess.Popen(
                shlex.split(cmd),
                stdout=logf,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,  # its own process group: _stop can end its children too
            )
        except OSError as e:  # e.g. the command's program is not installed
            raise InferenceError(
                f"restart: cannot start the inference server with {cmd!r}: {e}"
            ) from e
        finally:
            logf.close()
        url = f"http://127.0.0.1:{self.cfg.vllm_port}/health"
        try:
            wait_for_http(url, timeout=self.cfg.inference_startup_timeout, proc=self.proc)
        except (TimeoutError, RuntimeError) as e:
            raise InferenceError(
                f"restart: inference server did not come up ({e}); see {self.log_path}"
            ) from e
        with self.http_client(30.0) as http:
            self._label(http, step)

    def _stop(self, grace: float = 10.0) -> None:
        """SIGTERM the server, then SIGKILL its whole process group if anything of it is left after
        ``grace`` seconds: vLLM stops its engine at once but its HTTP server then waits for clients'
        open connections (an env's pending request) to close, which can take as long as the client's
        timeout; and its engine process can outlive the API process, still holding the GPU's
        memory. Returns when no process of the group is left (the next server's memory is free)."""
        if self.proc is None:
            return
        pgid = self.proc.pid  # start_new_session: the server leads its own process group
        deadline = time.monotonic() + grace
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = group_members(pgid)
        if left:
            log.warning(
                "restart: %d process(es) of the old inference server still running after %.0f s; "
                "killing them",
                len(left),
                grace,
            )
            signal_group(pgid, signal.SIGKILL)
            end = time.monotonic() + 10
            while group_members(pgid) and time.monotonic() < end:
                time.sleep(0.05)
        if self.proc.poll() is None:
            self.proc.wait(10)

    def start(self, model_path: str, step: int = 0) -> None:
        self._launch(model_path, step)

    def refresh(
        self, step: int, model: Any, tokenizer: Any, state_dict: Any = None
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        path = self._save(step, model, tokenizer, state_dict, dtype=self.publish_dtype)
        t_load = time.perf_counter()
        self._stop()
        self._launch(str(path.resolve()), step)
        done = time.perf_counter()
        return {
            "policy_version": step,
            "refresh_s": done - t0,
            "server_load_s": done - t_load,
            "refresh_mib": _mib(self.last_saved_bytes),
            "restart_memory_wait_s": self.memory_wait_s,
        }

    def close(self) -> None:
        self._stop()


def _release_accelerator_memory() -> None:
    """On a GPU shared with the server, hand the trainer's cached blocks back before it starts."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


class LoraRefresh(WeightRefresh):
    """Train a peft LoRA adapter; save only the adapter and hot-load it by name on every server.

    The adapter is published under ``lora_adapter_name`` in ``start`` (before the first rollout, from
    the freshly initialised or resumed adapter), so envs requesting that name never meet a 404, and is
    replaced in place on every refresh.

    With ``async_lora_load`` the adapter is saved at once (a snapshot before the next optimizer step)
    and the servers' loads run in a background thread while the trainer pulls and trains the next
    batch, as in reload mode: the next refresh (or ``close``) waits for them first, so at most one is
    in flight and a failed load surfaces one step later, never silently. Off by default: it costs a
    step of policy lag, and where a load was slow (vLLM on one busy CPU core, 14-25 s) generation
    stalled with it, so the trainer waited for its batch instead.
    """

    mode = "lora"

    def __init__(self, cfg: TrainingConfig) -> None:
        super().__init__(cfg)
        self._http = self.http_client(120.0)
        self._model: Any = None
        self._published = False
        self._loads = BackgroundLoad(cfg.async_lora_load)
        # the newest completed load: (trainer step of its adapter, seconds the servers took)
        self._done: Optional[tuple[int, float]] = None

    def prepare_model(self, model: Any, resume_from: Optional[str] = None) -> Any:
        from peft import LoraConfig, PeftModel, get_peft_model

        if resume_from is not None:  # the checkpoint holds the adapter trained so far
            self._model = PeftModel.from_pretrained(model, resume_from, is_trainable=True)
            return self._model

        lcfg = LoraConfig(
            r=self.cfg.lora_rank,
            lora_alpha=self.cfg.lora_alpha,
            target_modules=list(self.cfg.lora_target_modules),
            task_type="CAUSAL_LM",
        )
        self._model = get_peft_model(model, lcfg)
        return self._model

    def start(self, model_path: str, step: int = 0) -> None:
        if self._model is None:
            raise ConfigError("lora: prepare_model must run before start")
        # synchronous: envs must find the name before their first rollout
        self._publish(self._save(0, self._model, None, name="start"), step)

    def _publish(self, path: Path, step: int) -> None:
        t0 = time.perf_counter()
        name = self.cfg.lora_adapter_name
        for url in self.urls:
            base = url.rstrip("/")
            self._routes(self._http, url).load_lora(
                self._http, base, name, str(path.resolve()), replace=self._published, version=step
            )
        self._published = True
        self._done = (step, time.perf_counter() - t0)
        log.info(
            "lora: step %d's adapter loaded by %d server(s) (%.2f s)",
            step,
            len(self.urls),
            self._done[1],
        )

    def wait_published(self) -> None:
        """Block until the adapter in flight (if any) is loaded; re-raises its failure here."""
        self._loads.wait()

    def refresh(
        self, step: int, model: Any, tokenizer: Any, state_dict: Any = None
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        self.wait_published()  # the previous load, before its folder can be rotated away
        # One stable name, replaced each time: envs keep requesting the same model name and always get
        # the newest adapter, and servers never accumulate one adapter per step.
        path = self._save(step, model, None)  # a PeftModel saves only the adapter
        self._loads.run(self._publish, path, step)
        # synchronous: this step's load; async: the newest that has completed (None before any)
        done_step, load_s = self._done if self._done is not None else (None, None)
        return {
            "policy_version": step,
            "lora_name": self.cfg.lora_adapter_name,
            "weights_version_step": done_step,
            "refresh_s": time.perf_counter() - t0,
            "server_load_s": load_s,  # the servers' /v1/load_lora_adapter (async: it overlapped a step)
        }

    def close(self) -> None:
        try:
            self._loads.close()
        finally:
            self._http.close()


def _mib(n: Optional[int]) -> Optional[float]:
    return None if n is None else round(n / 2**20, 3)


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")
