"""Inference server configuration (Atropos names): ``ServerBaseline``, ``APIServerConfig``, ``ReasoningConfig``.

``ServerBaseline`` describes servers without addresses (the manager derives local ones, as Atropos
does); ``APIServerConfig`` is one concrete server. ``server_type`` names the backend in
``inference_clients.registry`` (``openai``, ``vllm``, ``sglang``, ``trl``, ``atropos`` = our CPU engine);
an unknown name is refused when the servers are built from the configs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ServerBaseline(BaseModel):
    """Settings shared by every server; on its own it means "local servers on ports 9004-9007"."""

    model_config = ConfigDict(validate_assignment=True, protected_namespaces=())

    timeout: int = Field(
        default=1200,
        ge=1,
        description="Most seconds one inference request may take: the cap of its timeout, which "
        "is timeout_base + max_tokens / min_tokens_per_second (this cap alone without max_tokens).",
    )
    timeout_base: float = Field(
        default=60.0,
        gt=0,
        description="Seconds every inference request may take on top of its generation time "
        "(queueing and prompt processing on the server).",
    )
    min_tokens_per_second: float = Field(
        default=4.0,
        gt=0,
        description="Slowest generation speed (tokens/s per request, under load) still taken as "
        "working: a request asking for max_tokens gets timeout_base + max_tokens / this seconds.",
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
    server_type: str = Field(
        default="openai",
        description="Backend protocol: openai, vllm (also our CPU engine), sglang, trl or atropos "
        "(our CPU engine, which the trainer can also refresh).",
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


REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


@dataclasses.dataclass
class ReasoningConfig:
    """Thinking/reasoning request settings (Atropos's name); enabled by any effort or budget.

    ``build_extra_body`` gives what to merge into a request's ``extra_body``: the official OpenAI
    endpoint takes ``reasoning_effort``; OpenRouter-style providers take ``reasoning: {...}`` with
    either an effort or a token budget (never both)."""

    enabled: bool = False
    effort: Optional[str] = None
    max_tokens: Optional[int] = None

    EFFORT_TO_MAX_TOKENS = {
        "none": 1024,
        "minimal": 3200,
        "low": 6400,
        "medium": 16000,
        "high": 25600,
        "xhigh": 30400,
    }

    def __post_init__(self) -> None:
        if self.effort is not None and self.effort not in REASONING_EFFORTS:
            raise ValueError(
                f"Invalid reasoning_effort: {self.effort}. Must be one of: {REASONING_EFFORTS}"
            )
        if self.effort is not None or self.max_tokens is not None:
            self.enabled = True

    def is_reasoning_kwargs_active(self) -> bool:
        return self.enabled

    def build_extra_body(
        self, base_url: Optional[str] = None, use_max_tokens: bool = False
    ) -> Optional[dict[str, Any]]:
        if not self.enabled:
            return None
        if base_url and "api.openai.com" in base_url:
            return {"reasoning_effort": self.effort or "medium"}
        reasoning: dict[str, Any] = {"enabled": True}
        if self.effort is not None:
            if use_max_tokens:
                reasoning["max_tokens"] = self.EFFORT_TO_MAX_TOKENS.get(self.effort, 8192)
            else:
                reasoning["effort"] = self.effort
        elif self.max_tokens is not None:
            reasoning["max_tokens"] = self.max_tokens
        return {"reasoning": reasoning}

    @classmethod
    def from_env_config(cls, env_config: Any) -> ReasoningConfig:
        """From an env config's ``thinking_mode`` / ``reasoning_effort`` / ``max_reasoning_tokens``."""
        effort = getattr(env_config, "reasoning_effort", None)
        budget = getattr(env_config, "max_reasoning_tokens", None)
        enabled = bool(getattr(env_config, "thinking_mode", False)) or effort or budget
        return cls(enabled=bool(enabled), effort=effort, max_tokens=budget)


__all__ = ["REASONING_EFFORTS", "APIServerConfig", "ReasoningConfig", "ServerBaseline"]
