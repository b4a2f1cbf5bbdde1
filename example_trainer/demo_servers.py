"""The demo's inference server: our CPU engine (default) or a real vLLM server (``--inference vllm``).

Both serve the policy as ``policy`` on loopback and take the trainer's weights in place after every step
(``--weight-refresh reload``): our engine through ``/update_weights_from_disk``, vLLM through its dev-mode
routes and atroposlib's worker extension, which the trainer finds by asking the server what it is.
vLLM runs with its own Python (``ATROPOS_VLLM_PYTHON`` or the environment ``scripts/setup_vllm.sh`` made).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

from atroposlib.inference.vllm_launch import find_vllm_python, vllm_server

SERVED_NAME = "policy"


def vllm_missing() -> Optional[str]:
    """Why ``--inference vllm`` cannot run here, or None."""
    if find_vllm_python() is None:
        return (
            "--inference vllm needs vLLM in its own environment: run scripts/setup_vllm.sh "
            "or set ATROPOS_VLLM_PYTHON to a Python that has vllm"
        )
    return None


def inference_command(
    kind: str, model_dir: Path, port: int, threads: int, cache_dir: Path
) -> tuple[list[str], dict[str, str]]:
    """argv and extra environment of the demo's inference server of ``kind`` ('engine' or 'vllm')."""
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
    ]
    return argv, {}


def merged_env(base: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """``base`` plus ``extra``; a PYTHONPATH in ``extra`` goes in front of the one in ``base``."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = v + ":" + base[k] if k == "PYTHONPATH" and base.get(k) else v
    return out


def refresh_times(rows: list[dict[str, Any]]) -> str:
    """A one-line summary of the trainer's refresh timings (save + hand-off, and the server's load)."""
    save = [r["refresh_s"] for r in rows if r.get("refresh_s") is not None]
    push = [r["reload_push_s"] for r in rows if r.get("reload_push_s") is not None]
    if not save:
        return "no refresh timings recorded"
    text = f"refresh on the trainer's side (save + hand-off) {sum(save) / len(save):.3f} s mean"
    if push:
        text += f"; server load in the background {sum(push) / len(push):.3f} s mean"
    return text


__all__ = ["SERVED_NAME", "inference_command", "merged_env", "refresh_times", "vllm_missing"]
