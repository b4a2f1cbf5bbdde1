"""``ProxySettings``: one ``atropos-proxy`` process (its address, key and limits, and the backend it
fronts), overridable by ``ATROPOS_PROXY_*`` environment variables.

``ProxySettings.from_env(**flags)`` is what the CLI uses: defaults < environment variables < flags
(the flags are generated from the fields by ``atroposlib.utils.settings_cli``). The key is best given
as ``ATROPOS_PROXY_API_KEY``: a flag is visible to every user of the machine in ``ps``. The app
itself (``create_app``) reads only the limits and the key; the backend fields are the CLI's.
"""

from __future__ import annotations

import os
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from atroposlib.errors import ConfigError
from atroposlib.utils.settings_cli import format_validation_error

ENV_PREFIX = "ATROPOS_PROXY_"


class ProxySettings(BaseModel):
    """Configuration of one managed-server proxy (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field("127.0.0.1", description="Interface to bind (0.0.0.0 exposes it: set a key).")
    port: int = Field(9100, ge=0, le=65535, description="TCP port to listen on (0: any free one).")
    api_key: Optional[str] = Field(
        None,
        description="Bearer key required on every route but /health (None: open). Prefer the "
        "environment variable: a flag shows in ps.",
    )
    max_sessions: int = Field(
        1024, ge=1, description="Open sessions at most; creating one more is a 429."
    )
    session_idle_timeout: float = Field(
        1800.0,
        gt=0,
        description="Seconds a session may go unused before it is closed (its nodes with it); "
        "counted in /health as sessions_expired.",
    )
    max_n: int = Field(128, ge=1, description="Largest n (choices) one request may ask for.")
    default_max_tokens: int = Field(
        1024,
        ge=1,
        description="Reply budget of a request that gives none, when the backend does not say its "
        "context length (else the rest of the context).",
    )
    base_url: list[str] = Field(
        default_factory=list,
        description="The backend inference servers (http://host:port/v1), one or more.",
    )
    server_type: Literal["vllm", "sglang", "openai"] = Field(
        "vllm",
        description="The backends' kind: vllm (also our engine) and sglang give token ids; openai "
        "is text-only (placeholder logprobs: not for training).",
    )
    model_name: Optional[str] = Field(
        None,
        description="The backends' served model name, which the proxy serves too (default: the "
        "first model the backend lists).",
    )
    tokenizer: Optional[str] = Field(
        None, description="Tokenizer folder or name (default: the model name)."
    )
    backend_api_key: Optional[str] = Field(
        None, description="Bearer key the backends require (prefer the environment variable)."
    )
    on_token_drift: Literal["keep", "split", "drop"] = Field(
        "keep", description="What a session does when re-rendering would change tokens."
    )
    log_level: Literal["critical", "error", "warning", "info", "debug"] = Field(
        "info", description="Log level."
    )

    @classmethod
    def from_env(cls, **overrides: Any) -> ProxySettings:
        """Defaults < ``ATROPOS_PROXY_*`` environment variables < ``overrides`` (``base_url``'s
        variable is comma-separated)."""
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            raw = os.environ.get(ENV_PREFIX + name.upper())
            if raw:
                values[name] = (
                    [u.strip() for u in raw.split(",") if u.strip()] if name == "base_url" else raw
                )
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(values)
        except ValidationError as e:
            raise ConfigError(format_validation_error(e, cls, lead="", as_flags=True)) from None


__all__ = ["ENV_PREFIX", "ProxySettings"]
