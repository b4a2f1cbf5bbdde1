"""The tiny preset's loop as plain child processes, for bench/gpu_check.py (the demo itself runs a
topology through the launcher's local backend): ``Services``, the inference server command (our CPU
engine, or a real vLLM server with ``--inference vllm``), the commands of run-api, the arithmetic env
and the trainer beside it; and ``vllm_missing``, whether vLLM can run here at all.

Both serve the policy as ``policy`` on loopback and take the trainer's weights in place after every step
(``--weight-refresh reload``): our engine through ``/update_weights_from_disk``, vLLM through its dev-mode
routes and atroposlib's worker extension, which the trainer finds by asking the server what it is.
vLLM runs with its own Python (``ATROPOS_VLLM_PYTHON`` or the environment ``scripts/setup_vllm.sh`` made).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional

from atroposlib.inference.vllm_launch import find_vllm_python, vllm_server
from demo.paths import REPO
from demo.presets.tiny_arithmetic import ENV_FILE, SERVED_NAME


class Services:
    """The child processes of the demo; all are stopped (SIGTERM, then SIGKILL) on exit."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: dict[str, subprocess.Popen] = {}

    def start(
        self, name: str, cmd: list[str], env: Optional[dict[str, str]] = None
    ) -> subprocess.Popen:
        fh = open(self.logs / f"{name}.log", "ab")
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        fh.close()
        self.procs[name] = proc
        return proc

    def dead(self) -> Optional[str]:
        """A service that exited with an error (an env finishing its total_steps exits with 0)."""
        for name, p in self.procs.items():
            if p.poll() is not None and (p.returncode != 0 or name != "env"):
                return name
        return None

    def tail(self, name: str, n: int = 15) -> str:
        path = self.logs / f"{name}.log"
        return (
            "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""
        )

    def stop(self, name: str) -> None:
        p = self.procs.pop(name, None)
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)

    def stop_all(self) -> None:
        for name in list(self.procs)[::-1]:
            self.stop(name)


def vllm_missing() -> Optional[str]:
    """Why ``--inference vllm`` cannot run here, or None."""
    if find_vllm_python() is None:
        return (
            "--inference vllm needs vLLM in its own environment: run scripts/setup_vllm.sh "
            "or set ATROPOS_VLLM_PYTHON to a Python that has vllm"
        )
    return None


def inference_command(
    kind: str, model_dir: Path, port: int, threads: int, cache_dir: Path, device: str = "cpu"
) -> tuple[list[str], dict[str, str]]:
    """argv and extra environment of the demo's inference server of ``kind`` ('engine' or 'vllm');
    ``device`` places our engine (vLLM picks its own)."""
    if kind == "vllm":
        server = vllm_server(
            str(model_dir), port, served_name=SERVED_NAME, max_model_len=256, dev_mode=True
        )
        return server.argv, {**server.env, "VLLM_CACHE_ROOT": str(cache_dir)}
    argv = [
        sys.executable,
        "-m",
        "atroposlib.cli.serve_model",
        "--model",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        SERVED_NAME,
        "--torch-threads",
        str(threads),
        "--batch-window-ms",
        "10",
        "--device",
        device,
    ]
    return argv, {}


# The tiny preset's loop as plain commands, for bench/gpu_check.py (the demo itself builds a topology).
def env_command(
    args: argparse.Namespace, api_url: str, engine_url: str, model_dir: Path, out: Path
) -> list[str]:
    """argv of the arithmetic env's ``serve``: rollouts from the server at ``engine_url`` to ``api_url``."""
    return [
        sys.executable,
        str(ENV_FILE),
        "serve",
        "--env.tokenizer_name",
        str(model_dir),
        "--env.rollout_server_url",
        api_url,
        "--env.group_size",
        str(args.group_size),
        "--env.max_batches_offpolicy",
        "1",
        "--env.total_steps",
        str(args.steps),
        "--env.seed",
        str(args.seed),
        "--env.spool_dir",
        str(out / "spool"),
        "--env.max_num_workers",
        str(args.prompts_per_step // 2),
        "--openai.base_url",
        engine_url + "/v1",
        "--openai.api_key",
        "x",
        "--openai.model_name",
        SERVED_NAME,
        "--openai.server_type",
        "vllm",
    ]


def api_command(port: int, data_dir: Path) -> list[str]:
    """argv of ``run-api`` on loopback, starting a fresh run in ``data_dir``."""
    return [
        sys.executable,
        "-m",
        "atroposlib.cli.run_api",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        "--fresh",  # a demo is a new run even when OUT holds an earlier one
    ]


def trainer_command(
    args: argparse.Namespace,
    model_dir: Path,
    api_url: str,
    engine_url: str,
    trainer_dir: Path,
    device: str,
) -> list[str]:
    """argv of the GRPO trainer: pulls from ``api_url``, reloads the server at ``engine_url`` in place
    after every step."""
    return [
        sys.executable,
        "-m",
        "example_trainer.grpo",
        "--model-name",
        str(model_dir),
        "--api-url",
        api_url,
        "--inference-urls",
        engine_url,
        "--weight-refresh",
        "reload",
        "--vllm-restart-interval",
        "1",
        "--training-steps",
        str(args.steps),
        "--batch-size",
        str(args.prompts_per_step * args.group_size),
        "--seq-len",
        "64",
        "--lr",
        str(args.lr),
        "--save-path",
        str(trainer_dir),
        "--torch-threads",
        str(args.threads),
        "--control",
        args.control,
        "--seed",
        str(args.seed),
        "--device",
        device,
        "--overlong",  # the README's figures were measured training cut replies like finished ones
        "keep",
    ]


__all__ = [
    "SERVED_NAME",
    "Services",
    "api_command",
    "env_command",
    "inference_command",
    "trainer_command",
    "vllm_missing",
]
