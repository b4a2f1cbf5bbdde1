"""Settings of the trajectory API server: one pydantic model, overridable by ``ATROPOS_*`` env vars.

``ApiSettings.from_env(**flags)`` is what the CLI uses: defaults < environment variables < flags
(the flags are generated from the fields by ``atroposlib.utils.settings_cli``).
Every field's environment variable is ``ATROPOS_`` + the upper-cased field name
(``ATROPOS_DATA_DIR``, ``ATROPOS_API_TOKEN``, ``ATROPOS_MAX_QUEUED_SEQUENCES`` ...).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from atroposlib.errors import ConfigError
from atroposlib.utils.cli import LOG_LEVELS, check_log_level
from atroposlib.utils.settings_cli import format_validation_error

ENV_PREFIX = "ATROPOS_"
DEFAULT_MAX_STALENESS = 4
"""The default staleness bound, in trainer steps (why 4: docs/api.md, 'Staleness')."""


class ApiSettings(BaseModel):
    """Configuration of one ``run-api`` process."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field("127.0.0.1", description="Interface to bind (use 0.0.0.0 to expose it).")
    port: int = Field(8000, ge=0, le=65535, description="TCP port to listen on.")
    store: Literal["sqlite", "memory"] = Field(
        "sqlite", description="'sqlite' (durable, under data_dir) or 'memory' (lost on exit)."
    )
    data_dir: Path = Field(
        Path("./atropos-data"), description="Directory holding the SQLite store."
    )
    sqlite_synchronous: Literal["NORMAL", "FULL"] = Field(
        "NORMAL",
        description="SQLite synchronous mode in WAL: NORMAL survives process crashes (SIGKILL, OOM); "
        "FULL also survives power loss at the cost of an fsync per commit.",
    )
    api_token: Optional[str] = Field(
        None, description="Bearer token required on every endpoint but / and /health (None: open)."
    )
    max_queued_sequences: int = Field(
        1_000_000,
        gt=0,
        description="Bound on queued + buffered sequences; beyond it ingest gets 503.",
    )
    max_queued_bytes: int = Field(
        4 * 1024**3,
        gt=0,
        description="Bound on the payload bytes of queued + buffered groups; beyond it ingest gets 503.",
    )
    retry_after_seconds: float = Field(1.0, gt=0, description="Retry-After sent with a 503.")
    max_staleness: Optional[int] = Field(
        DEFAULT_MAX_STALENESS,
        ge=1,
        description="Drop a group at batch formation when the oldest weights that generated it are "
        "more than this many steps behind the trainer (policy_version < current_step - "
        "max_staleness); envs hold no more batches than keeps them within it. 'off': no bound. "
        "See docs/api.md, 'Staleness'.",
    )
    batch_shares: Literal["allocation", "weight"] = Field(
        "allocation",
        description="Each env's guaranteed share of a batch: 'allocation', its min_batch_allocation "
        "(none: first come, first served, as Atropos); 'weight', envs without one split the rest "
        "by their weight. An env is told its share and holds no more than it (backpressure).",
    )
    max_body_bytes: int = Field(
        128 * 1024 * 1024,
        gt=0,
        description="Largest request body on the wire (a 64 x 32k-token group with logprobs and "
        "messages is ~72 MiB of JSON; see docs/api.md).",
    )
    max_decompressed_bytes: int = Field(
        128 * 1024 * 1024, gt=0, description="Largest request body after gzip decompression."
    )
    offload_min_bytes: int = Field(
        8 * 1024 * 1024,
        ge=0,
        description="Bodies at least this large are parsed and validated in a child process, "
        "off the event loop (other requests keep being answered meanwhile).",
    )
    gzip_min_bytes: int = Field(
        64 * 1024,
        ge=0,
        description="Responses at least this large are gzipped when the client accepts it.",
    )
    gzip_level: int = Field(1, ge=1, le=9, description="gzip level for responses (1 is fastest).")
    dedup_window: int = Field(
        100_000,
        ge=1,
        description="A retried group_id is recognised among the last N groups received; the rows "
        "(and ids) of older acknowledged or dropped groups are deleted, so a long run stays bounded.",
    )
    history_size: int = Field(
        1000, ge=0, description="Delivered/dropped groups kept readable for GET /peek."
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="Allowed CORS origins (never '*' together with credentials). Empty: no CORS.",
    )
    log_level: str = Field(
        "info", description=f"Logging level of the server: {', '.join(LOG_LEVELS)}."
    )
    progress_interval: float = Field(
        30.0,
        ge=0,
        description="Seconds between activity lines (groups arrived by env, batches handed out, "
        "queue, trainer step), logged only when something happened; 0: none.",
    )

    @field_validator("max_staleness", mode="before")
    @classmethod
    def _staleness_off(cls, v: Any) -> Any:
        """``off`` / ``none`` (any case) switch the bound off."""
        if isinstance(v, str) and v.strip().lower() in ("off", "none"):
            return None
        return v

    @field_validator("log_level")
    @classmethod
    def _known_log_level(cls, v: str) -> str:
        """One of uvicorn's levels, in lower case (``trace`` is uvicorn's, below ``debug``)."""
        return check_log_level(v)

    @classmethod
    def from_env(cls, **overrides: Any) -> ApiSettings:
        """Defaults < ``ATROPOS_*`` environment variables < ``overrides`` (None values are ignored)."""
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            raw = os.environ.get(ENV_PREFIX + name.upper())
            if raw is not None and raw != "":
                if name == "cors_origins":
                    values[name] = [o.strip() for o in raw.split(",") if o.strip()]
                else:
                    values[name] = raw
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(values)
        except ValidationError as e:
            raise ConfigError(
                format_validation_error(e, cls, lead="invalid API setting ")
            ) from None


__all__ = ["DEFAULT_MAX_STALENESS", "ENV_PREFIX", "ApiSettings"]
