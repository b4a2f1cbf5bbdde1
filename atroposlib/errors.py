"""The error model of the whole package: one small hierarchy, imported by every wing.

User mistakes (bad config, bad request, bad model dir) are ``AtroposError`` subclasses with a message
that says what to change; CLIs print the message and exit non-zero without a traceback.
"""

from __future__ import annotations

from typing import Any, Optional


class AtroposError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(AtroposError):
    """A configuration value, flag or file is invalid; the message names the field."""


class SchemaError(AtroposError):
    """Data does not match the wire schema (e.g. ragged tokens/masks); the message names field and index."""


class APIError(AtroposError):
    """The trajectory API answered with an error status."""

    def __init__(self, status_code: int, message: str, detail: Any = None) -> None:
        super().__init__(f"trajectory API returned {status_code}: {message}")
        self.status_code = status_code
        self.message = message
        self.detail = detail


class APIUnavailable(AtroposError):
    """The trajectory API could not be reached or asked us to back off (503); retrying may succeed."""

    def __init__(self, message: str, retry_after: Optional[float] = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class BatchUndeliverable(APIUnavailable):
    """A ``GET /batch`` answer could not be parsed; asking again makes the API verify the batch and
    quarantine what cannot be delivered (so retrying, as for any ``APIUnavailable``, gets past it)."""


class AuthError(APIError):
    """The API refused our bearer token (401/403)."""


class InferenceError(AtroposError):
    """An inference server failed or refused a request."""


class InferenceUnavailable(InferenceError):
    """No healthy inference server could take the request. ``slow`` is True when the last server
    tried answers its health probe but no request within the time limit: it is alive, generating
    slower than the request limit allows, not unreachable."""

    def __init__(self, message: str, slow: bool = False) -> None:
        super().__init__(message)
        self.slow = slow


class InferenceRejected(InferenceError):
    """An inference server answered a 4xx that retrying will not change (bad model name, bad key,
    bad request). ``permanent`` is True for answers that do not depend on the request's content
    (401, 403, 404: wrong key or a model/route the server does not have): every request will fail."""

    PERMANENT_STATUSES = (401, 403, 404)

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code

    @property
    def permanent(self) -> bool:
        return self.status_code in self.PERMANENT_STATUSES


class WeightTransferError(InferenceError):
    """Weights could not be pushed through an inference server's weight-transfer API: a server refused
    the set-up, or a step (an HTTP call, the rendezvous, a broadcast) failed or missed its deadline."""


class PromptTooLong(AtroposError, ValueError):
    """A prompt leaves no room for an answer within ``max_token_length``: that item cannot be asked
    as it is (an evaluation skips and counts it; see ``atroposlib.runtime.eval_items``)."""


class RunFailed(AtroposError):
    """A command ran but could not do its job (nothing produced, every attempt failed, a permanent
    error); the message is the one-line summary the CLI prints before exiting non-zero."""


class TokenizerMismatch(AtroposError):
    """Two components that must share a tokenizer (e.g. teacher and student) do not."""


class ModelLoadError(AtroposError):
    """A model or tokenizer directory is missing, incomplete or unreadable."""


class WorkerTimeout(AtroposError):
    """An item's rollout ran past ``--env.worker_timeout`` and was cancelled (it is retried)."""


class TokenDrift(AtroposError):
    """A managed episode's next turn would not re-render to the tokens the model saw, and the
    session drops such episodes (``on_token_drift='drop'``): the episode ends here, counted."""


class RewardUnavailable(AtroposError):
    """Scoring failed for infrastructure reasons (grader down, sandbox failure): not a 0 reward."""


__all__ = [
    "APIError",
    "APIUnavailable",
    "AtroposError",
    "AuthError",
    "BatchUndeliverable",
    "ConfigError",
    "InferenceError",
    "InferenceRejected",
    "InferenceUnavailable",
    "ModelLoadError",
    "PromptTooLong",
    "RewardUnavailable",
    "RunFailed",
    "SchemaError",
    "TokenDrift",
    "TokenizerMismatch",
    "WorkerTimeout",
]
