"""Typed configuration of the CPU inference engine and its HTTP server (one pydantic model)."""

from __future__ import annotations

import os
from typing import Literal, Optional

from pydantic import BaseModel, Field, field_validator

from atroposlib.utils.cli import LOG_LEVELS, check_log_level

API_KEY_ENV = "ATROPOS_ENGINE_API_KEY"
"""The environment variable of ``api_key`` (``--api-key`` wins over it)."""


class EngineConfig(BaseModel):
    """Everything `atropos-serve-model` can be told; CLI flags map one-to-one onto these fields."""

    model_path: str = Field(
        description="Local transformers model directory (config, weights, tokenizer)."
    )
    served_model_name: Optional[str] = Field(
        default=None,
        description="Name reported by /v1/models and in responses (default: the directory name).",
    )
    host: str = Field(default="127.0.0.1", description="Interface to bind the HTTP server to.")
    port: int = Field(default=9001, ge=0, le=65535, description="TCP port of the HTTP server.")
    max_batch_size: int = Field(
        default=64,
        ge=1,
        description="Most rows (sequences; n>1 counts n) generated together in one batch.",
    )
    batch_window_ms: float = Field(
        default=5.0,
        ge=0,
        description="How long the worker waits for more requests after the first one.",
    )
    max_queue: int = Field(
        default=1024,
        ge=1,
        description="Most requests waiting for generation; beyond it requests get 503.",
    )
    torch_threads: Optional[int] = Field(
        default=None,
        ge=1,
        description="torch intra-op threads (default: half the CPU cores, at least 1; all cores "
        "collapse as soon as anything else runs: see bench/engine_threads.py).",
    )
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        default="float32", description="Weights/compute dtype; float32 gives exact logprobs on CPU."
    )
    device: str = Field(
        default="cpu",
        pattern=r"^(cpu|cuda(:\d+)?)$",
        description="Where the model runs: cpu, cuda or cuda:N (one GPU; generation is the same code).",
    )
    max_model_len: Optional[int] = Field(
        default=None,
        ge=1,
        description="Context length (default: the model's max_position_embeddings).",
    )
    default_max_tokens: int = Field(
        default=16, ge=1, description="max_tokens of /v1/completions when the request gives none."
    )
    max_n: int = Field(default=128, ge=1, description="Largest `n` a single request may ask for.")
    refresh_mode: Literal["keep", "drain"] = Field(
        default="keep",
        description="How a weight refresh meets the rows being generated: keep (swap between two "
        "decode steps; rows go on with the new weights, their tokens' weight_versions say which "
        "weights sampled them) or drain (stop admitting rows, let the batch finish on the old "
        "weights, then swap: generation idles while it drains).",
    )
    api_key: Optional[str] = Field(
        default=None,
        description="Key every route but /health requires, as 'Authorization: Bearer KEY' (the "
        "openai client's api_key; vLLM's --api-key). Prefer the environment variable "
        "ATROPOS_ENGINE_API_KEY: a flag shows in ps.",
    )
    log_level: str = Field(
        default="info", description=f"uvicorn / logging level: {', '.join(LOG_LEVELS)}."
    )
    access_log: bool = Field(
        default=False,
        description="One log line per HTTP request (uvicorn's access log). Off by default: a "
        "summary line every activity_interval seconds instead.",
    )
    activity_interval: float = Field(
        default=60.0,
        ge=0,
        description="Seconds between summary lines (requests by endpoint and status, tokens "
        "generated, queue, weights version), logged only when requests came; 0: none.",
    )

    @field_validator("log_level")
    @classmethod
    def _known_log_level(cls, v: str) -> str:
        return check_log_level(v)


def default_torch_threads(cores: Optional[int] = None) -> int:
    """Half the CPU cores (at least 1): torch's thread pool spins on every core it owns, so with all
    cores it stalls whenever another process (the env, the API, the trainer) needs one."""
    n = cores if cores is not None else (os.cpu_count() or 1)
    return max(1, n // 2)


__all__ = ["API_KEY_ENV", "EngineConfig", "default_torch_threads"]
