"""Inference server configuration (Atropos names): ``ServerBaseline`` and ``APIServerConfig``.

``ServerBaseline`` describes servers without addresses (the manager derives local ones, as Atropos
does); ``APIServerConfig`` is one concrete server. ``server_type`` picks the backend:

* ``openai`` - any OpenAI-compatible API through the ``openai`` client (text only);
* ``vllm`` - vLLM's OpenAI-compatible server with ``return_token_ids`` and logprobs (also our CPU engine);
* ``sglang`` - SGLang's native ``/generate`` with ``input_ids`` and ``return_logprob``;
* ``trl`` - TRL's vLLM server, spoken to like ``vllm``.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

ServerType = Literal["openai", "vllm", "sglang", "trl"]


class ServerBaseline(BaseModel):
    """Settings shared by every server; on its own it means "local servers on ports 9004-9007"."""

    model_config = ConfigDict(validate_assignment=True, protected_namespaces=())

    timeout: int = Field(
        default=1200, ge=1, description="Timeout of one inference request in seconds."
    )
    num_max_requests_at_once: int = Field(
        default=512,
        ge=1,
        description="Concurrent requests allowed on this server (divide by n yourself).",
    )
    num_requests_for_eval: int = Field(
        default=64, ge=1, description="Concurrent requests allowed on this server for evaluation."
    )
    model_name: str = Field(default="default", description="Model name sent with every request.")
    rolling_buffer_length: int = Field(
        default=1000,
        ge=1,
        description="Length of the rolling buffers of request timings (metrics).",
    )
    server_type: ServerType = Field(
        default="openai",
        description="Backend protocol: openai, vllm (also our CPU engine), sglang or trl.",
    )
    tokenizer_name: str = Field(
        default="none",
        description="Tokenizer of the served model ('none': use the env's tokenizer).",
    )
    max_retries: int = Field(
        default=3,
        ge=1,
        description="Attempts per request (with exponential backoff) before failing over.",
    )


class APIServerConfig(ServerBaseline):
    """One inference server."""

    api_key: Optional[str] = Field(default="", description="API key sent as a bearer token.")
    base_url: Optional[str] = Field(
        default="",
        description="Base URL, e.g. http://localhost:9001/v1 (empty: the OpenAI default).",
    )
    n_kwarg_is_ignored: bool = Field(
        default=False, description="The server ignores n; the client sends n separate requests."
    )
    health_check: bool = Field(
        default=True,
        description="Poll a cheap health endpoint (/health or /v1/models) of this server.",
    )
    health_check_interval: float = Field(
        default=5.0, gt=0, description="Seconds between health checks of this server."
    )

    @field_validator("base_url")
    @classmethod
    def _base_url_is_http(cls, v: Optional[str]) -> Optional[str]:
        """Reject a URL without a scheme up front instead of retrying it forever at run time."""
        if v and not v.strip().lower().startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return v.strip() if v else v


__all__ = ["APIServerConfig", "ServerBaseline", "ServerType"]
