"""How the inference servers get the trainer's new weights: one small strategy object per mode.

* ``restart`` (Atropos's path): the trainer owns the server process; every ``vllm_restart_interval`` steps it
  saves the model and relaunches the server on it (``inference_command`` with ``{model_path}``/``{port}``;
  vLLM's OpenAI server by default, our CPU engine with ``python -m atroposlib.cli.serve_model``).
* ``reload``: save and ``POST /update_weights_from_disk {"model_path": ...}`` to each running server (our
  CPU engine and SGLang). Servers keep their sockets, so envs see no dropped connection.
* ``lora``: the trained model is a peft LoRA wrapper; save only the adapter and hot-load it with vLLM's
  ``POST /v1/load_lora_adapter`` (needs ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` and ``--enable-lora``).
* ``none``: weights stay where they are (evaluation runs, or servers refreshed by someone else).

Each refresh returns the policy version (the trainer step) it published, plus what the server reported
(``weights_version`` for our engine), so the metrics show which step's weights are being sampled.
"""

from __future__ import annotations

import logging
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

import httpx

from atroposlib.errors import ConfigError, InferenceError
from atroposlib.utils.net import wait_for_http

from .checkpoint import save_model_folder
from .config import TrainingConfig

log = logging.getLogger(__name__)

DEFAULT_VLLM_COMMAND = (
    f"{shlex.quote(sys.executable)} -m vllm.entrypoints.openai.api_server --model {{model_path}} "
    "--served-model-name {served_name} --host 127.0.0.1 --port {port} --dtype auto "
    "--gpu-memory-utilization 0.45 --max-model-len {seq_len}"
)


class WeightRefresh:
    """Base strategy: ``prepare_model`` may wrap the model; ``start`` runs once; ``refresh`` per interval."""

    mode = "none"

    def __init__(self, cfg: TrainingConfig) -> None:
        self.cfg = cfg
        self.urls = cfg.resolved_inference_urls()
        self.weights_root = Path(cfg.save_path) / "weights"

    def prepare_model(self, model: Any, resume_from: Optional[str] = None) -> Any:
        """Wrap the freshly loaded model if the mode needs it (``resume_from``: a checkpoint folder)."""
        return model

    def start(self, model_path: str) -> None:
        """Called once before the first step, with the weights the run starts from."""

    def refresh(
        self, step: int, model: Any, tokenizer: Any, state_dict: Any = None
    ) -> dict[str, Any]:
        return {"policy_version": step}

    def close(self) -> None:
        """Release what ``start`` acquired."""

    # helpers ----------------------------------------------------------------------------
    def _save(self, step: int, model: Any, tokenizer: Any, state_dict: Any = None) -> Path:
        self.weights_root.mkdir(parents=True, exist_ok=True)
        out = save_model_folder(
            model, tokenizer, self.weights_root / f"step_{step:07d}", state_dict
        )
        # keep this one and the previous (a server may still be reading it)
        for old in sorted(p for p in self.weights_root.glob("step_*") if p.is_dir())[:-2]:
            shutil.rmtree(old, ignore_errors=True)
        return out


class NoRefresh(WeightRefresh):
    mode = "none"


class ReloadRefresh(WeightRefresh):
    """Save, then ask every server to load the folder (our engine, SGLang).

    With ``async_refresh`` (the default) the save happens at once (the weights are snapshotted before the
    next optimizer step) and the POSTs run in a background thread while the trainer pulls and trains the
    next batch; the next refresh (or ``close``) waits for them first, so at most one is in flight and
    failures surface one step later, never silently.
    """

    mode = "reload"

    def __init__(self, cfg: TrainingConfig, timeout: float = 120.0) -> None:
        super().__init__(cfg)
        self._http = httpx.Client(timeout=timeout)
        self._pool = ThreadPoolExecutor(max_workers=1) if cfg.async_refresh else None
        self._pending: Optional[Future] = None
        self._last_version: Any = None

    def start(self, model_path: str) -> None:
        if self.cfg.resume:  # the servers may still hold older weights than the checkpoint
            self._push(model_path)

    def _push(self, path: str) -> list[Any]:
        versions = []
        for url in self.urls:
            try:
                r = self._http.post(
                    url.rstrip("/") + "/update_weights_from_disk", json={"model_path": path}
                )
            except httpx.TransportError as e:
                raise InferenceError(f"reload: cannot reach inference server {url}: {e!r}") from e
            if r.status_code == 404:
                raise InferenceError(
                    f"reload: {url} has no /update_weights_from_disk endpoint; use --weight-refresh restart"
                )
            body = (
                r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
            )
            if r.status_code >= 400 or body.get("success") is False:
                raise InferenceError(
                    f"reload: {url} refused the weights: {r.status_code} {r.text[:300]}"
                )
            versions.append(body.get("weights_version"))
        self._last_version = versions[0] if versions else None
        return versions

    def _wait_pending(self) -> None:
        if self._pending is not None:
            fut, self._pending = self._pending, None
            fut.result()  # re-raises the background failure here

    def refresh(
        self, step: int, model: Any, tokenizer: Any, state_dict: Any = None
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        self._wait_pending()
        path = str(self._save(step, model, tokenizer, state_dict).resolve())
        if self._pool is not None:
            self._pending = self._pool.submit(self._push, path)
        else:
            self._push(path)
        return {
            "policy_version": step,
            "weights_version": self._last_version,
            "refresh_s": time.perf_counter() - t0,
        }

    def close(self) -> None:
        try:
            self._wait_pending()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            self._http.close()


class RestartRefresh(WeightRefresh):
    """The trainer launches the inference server and relaunches it on each new checkpoint."""

    mode = "restart"

    def __init__(self, cfg: TrainingConfig) -> None:
        super().__init__(cfg)
        self.command = cfg.inference_command or DEFAULT_VLLM_COMMAND
        for needed in ("{model_path}", "{port}"):
            if needed not in self.command:
                raise ConfigError(f"inference_command must contain {needed} (got {self.command!r})")
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = Path(cfg.save_path) / "inference_server.log"

    def _launch(self, model_path: str) -> None:
        cmd = self.command.format(
            model_path=shlex.quote(model_path),
            port=self.cfg.vllm_port,
            served_name=shlex.quote(self.cfg.model_name),
            seq_len=self.cfg.seq_len,
        )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        logf = open(self.log_path, "ab")
        log.info("starting inference server: %s", cmd)
        try:
            self.proc = subprocess.Popen(shlex.split(cmd), stdout=logf, stderr=subprocess.STDOUT)
        except (
            OSError
        ) as e:  # e.g. the command's program is not installed: the user's --inference-command
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

    def _stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def start(self, model_path: str) -> None:
        self._launch(model_path)

    def refresh(
        self, step: int, model: Any, tokenizer: Any, state_dict: Any = None
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        path = self._save(step, model, tokenizer, state_dict)
        self._stop()
        self._launch(str(path.resolve()))
        return {"policy_version": step, "refresh_s": time.perf_counter() - t0}

    def close(self) -> None:
        self._stop()


class LoraRefresh(WeightRefresh):
    """Train a peft LoRA adapter; save only the adapter and hot-load it by name on every server."""

    mode = "lora"

    def __init__(self, cfg: TrainingConfig) -> None:
        super().__init__(cfg)
        self._http = httpx.Client(timeout=120.0)

    def prepare_model(self, model: Any, resume_from: Optional[str] = None) -> Any:
        from peft import LoraConfig, PeftModel, get_peft_model

        if resume_from is not None:  # the checkpoint holds the adapter trained so far
            return PeftModel.from_pretrained(model, resume_from, is_trainable=True)

        lcfg = LoraConfig(
            r=self.cfg.lora_rank,
            lora_alpha=self.cfg.lora_alpha,
            target_modules=list(self.cfg.lora_target_modules),
            task_type="CAUSAL_LM",
        )
        return get_peft_model(model, lcfg)

    def refresh(
        self, step: int, model: Any, tokenizer: Any, state_dict: Any = None
    ) -> dict[str, Any]:
        path = self._save(step, model, None)  # a PeftModel saves only the adapter
        # One stable name, replaced each time: envs keep requesting the same model name and always get
        # the newest adapter, and servers never accumulate one adapter per step.
        name = self.cfg.lora_adapter_name
        for url in self.urls:
            base = url.rstrip("/")
            r = self._http.post(base + "/v1/unload_lora_adapter", json={"lora_name": name})
            if r.status_code >= 500:
                raise InferenceError(
                    f"lora: {url} failed to unload adapter {name}: {r.status_code} {r.text[:300]}"
                )
            # 4xx here means "not loaded yet" (first refresh) or no LoRA support, which the load reports.
            r = self._http.post(
                base + "/v1/load_lora_adapter",
                json={"lora_name": name, "lora_path": str(path.resolve())},
            )
            if r.status_code == 404:
                raise InferenceError(
                    f"lora: {url} has no /v1/load_lora_adapter endpoint (vLLM needs --enable-lora and "
                    "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; the CPU engine has it)"
                )
            if r.status_code >= 400:
                raise InferenceError(
                    f"lora: {url} refused adapter {name}: {r.status_code} {r.text[:300]}"
                )
        return {"policy_version": step, "lora_name": name}

    def close(self) -> None:
        self._http.close()


def make_weight_refresh(cfg: TrainingConfig) -> WeightRefresh:
    return {
        "none": NoRefresh,
        "reload": ReloadRefresh,
        "restart": RestartRefresh,
        "lora": LoraRefresh,
    }[cfg.weight_refresh](cfg)
