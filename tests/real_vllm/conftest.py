"""Fixtures of the real-vLLM tier: the vLLM Python, real vLLM server processes, a tiny model, and an
env-style sampler that keeps asking a server for rollouts while the trainer refreshes it.

vLLM runs in its own environment (``scripts/setup_vllm.sh`` makes it; ``ATROPOS_VLLM_PYTHON`` points at a
user's own). Where there is none, every test here is skipped with the one reason the set-up recorded.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import httpx
import pytest

from atroposlib.inference.vllm_launch import default_vllm_venv, find_vllm_python, vllm_server
from atroposlib.utils.net import free_port

STARTUP_TIMEOUT = 420.0  # two servers starting at once on a busy 2-core machine


def _skip_reason() -> Optional[str]:
    if find_vllm_python() is not None:
        return None
    failed = default_vllm_venv() / "install-failed.txt"
    if failed.is_file():
        return "vLLM could not be installed: " + failed.read_text().strip().splitlines()[-1]
    return (
        "no vLLM: run scripts/setup_vllm.sh (scripts/test.sh does) or set ATROPOS_VLLM_PYTHON to a "
        "Python that has vllm"
    )


@pytest.fixture(scope="session")
def vllm_python() -> str:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    return find_vllm_python()  # type: ignore[return-value]


class VllmProcess:
    """``python -m vllm.entrypoints.openai.api_server`` on a free loopback port (not yet waited for)."""

    def __init__(self, python: str, model: Path, log_path: Path, **kw: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        server = vllm_server(str(model), self.port, python=python, max_model_len=512, **kw)
        env = server.full_env()
        env["VLLM_CACHE_ROOT"] = str(log_path.parent / "vllm-cache")
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            server.argv, stdout=self._log, stderr=subprocess.STDOUT, env=env
        )

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT) -> VllmProcess:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if httpx.get(self.url + "/health", timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        tail = self.log_path.read_text(errors="replace")[-3000:]
        self.stop()
        raise RuntimeError(f"vLLM did not start (exit {self.proc.poll()}):\n{tail}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def start_servers(specs: list[tuple[Path, dict[str, Any]]], python: str, logs: Path):
    """Start several servers at once (their start-ups overlap), then wait for all of them."""
    procs = [
        VllmProcess(python, model, logs / f"vllm-{i}.log", **kw)
        for i, (model, kw) in enumerate(specs)
    ]
    try:
        for p in procs:
            p.wait_ready()
    except BaseException:
        for p in procs:
            p.stop()
        raise
    return procs


@pytest.fixture(scope="package")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The tiny Llama, taught one Hermes tool-call episode (``atroposlib.testing.taught_model``): the
    refresh, streaming and log-prob tests compare the servers with a forward pass of whatever weights
    it has, and the tool-call test samples its taught call from the same servers (one vLLM start-up
    less than a server of its own)."""
    from atroposlib.testing.taught_model import build_taught_model
    from tests.compat.test_managed_tool_calls import TOOLS, taught_replies

    return build_taught_model(
        tmp_path_factory.mktemp("vllm-tiny") / "model", taught_replies(), TOOLS
    )


def forward_logprobs(model: Any, prompt: list[int], completion: list[int]) -> list[float]:
    """Logprob of each completion token under ``model`` (a transformers / peft causal LM)."""
    import torch

    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)[len(prompt) - 1 : -1]
    return logp.gather(-1, torch.tensor(completion).unsqueeze(-1)).squeeze(-1).tolist()


def greedy(url: str, prompt: list[int], model: Optional[str] = None, n_tokens: int = 12):
    """Greedy ids and their logprobs from a server (``model`` None: the served base model)."""
    body: dict[str, Any] = {
        "prompt": prompt,
        "max_tokens": n_tokens,
        "temperature": 0.0,
        "logprobs": 0,
        "return_token_ids": True,
        "ignore_eos": True,
    }
    if model:
        body["model"] = model
    r = httpx.post(url + "/v1/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    ch = r.json()["choices"][0]
    return ch["token_ids"], ch["logprobs"]["token_logprobs"]


class EnvSampler:
    """An env's rollout loop in a thread: the env's ``vllm`` backend asks for groups without pause.

    ``failures`` lists every rollout that raised (after the backend's own retries); ``rollouts`` counts
    the ones that came back.
    """

    def __init__(self, url: str, model_name: str, prompt: list[int], max_retries: int = 3) -> None:
        from atroposlib.inference_clients.config import APIServerConfig

        self.config = APIServerConfig(
            base_url=url,
            server_type="vllm",
            model_name=model_name,
            api_key="x",
            health_check=False,
            max_retries=max_retries,
            timeout=120,
        )
        self.prompt = prompt
        self.rollouts = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        from atroposlib.inference_clients.server_manager import ServerManager

        sm = ServerManager([self.config])
        try:
            while not self._stop.is_set():
                try:
                    _, outs, lps, _ = await sm.tokens_and_logprobs_completion(
                        input_ids=self.prompt, n=2, max_tokens=6, temperature=1.0
                    )
                    assert len(outs) == 2 and all(
                        len(o) == len(lp) for o, lp in zip(outs, lps, strict=True)
                    )
                    self.rollouts += 1
                except Exception as e:  # a failed rollout: exactly what the tier must never see
                    self.failures.append(f"{type(e).__name__}: {e}")
        finally:
            await sm.close()

    def __enter__(self) -> EnvSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(120)


@pytest.fixture(scope="module")
def vllm_logs(tmp_path_factory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("vllm-logs")


@pytest.fixture(scope="package")
def dev_vllm(vllm_python, tiny_model_dir, tmp_path_factory) -> Iterator[dict[str, VllmProcess]]:
    """A plain and a LoRA (rank 4) vLLM server on the tiny model, in dev mode (the reload routes),
    started together once: the refresh tests change their weights; the streaming tests compare only
    the structure of streams, so they use the plain one too (a vLLM start-up is ~30 s of the suite).
    The plain one also takes weights by broadcast (``--weight-transfer-config``, atroposlib's
    ``atropos_gloo`` backend: vLLM's NCCL weight transfer on its CPU build); the LoRA one has no
    weight-transfer backend (it refuses that set-up, as an unconfigured vLLM does) and reports the
    log-probabilities of the distribution it samples from (``--logprobs-mode processed_logprobs``,
    as the SmolLM2 presets' server does).
    Idle, each holds ~3 GB and no CPU."""
    transfer = ("--weight-transfer-config", json.dumps({"backend": "atropos_gloo"}))
    plain, lora = start_servers(
        [
            (tiny_model_dir, {"dev_mode": True, "extra_args": transfer}),
            # as the SmolLM2 presets run theirs: log-probabilities of the distribution sampled from
            (
                tiny_model_dir,
                {
                    "dev_mode": True,
                    "lora_rank": 4,
                    "extra_args": ("--logprobs-mode", "processed_logprobs"),
                },
            ),
        ],
        vllm_python,
        tmp_path_factory.mktemp("dev-vllm-logs"),
    )
    try:
        yield {"plain": plain, "lora": lora}
    finally:
        plain.stop()
        lora.stop()
