"""The error model of the whole package: one small hierarchy, imported by every wing.

User mistakes (bad config, bad request, bad model dir) are ``AtroposError`` subclasses with a message
that says what to change; CLIs print the message and exit non-zero without a traceback. Every exception
a user of the package may catch is defined here (the module that raises it re-exports the name), so
``except AtroposError`` catches whatever the package raises on purpose; purely internal signals that
never leave their module stay there, marked as such.
"""

from __future__ import annotations

from typing import Any, ClassVar, Optional


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


class ApiProblem(AtroposError):
    """A request the trajectory API refuses (the server side); its app answers it as
    ``ErrorResponse`` JSON with ``status_code`` and ``headers``."""

    def __init__(
        self,
        status_code: int,
        error: str,
        detail: Any = None,
        headers: Optional[dict[str, str]] = None,
    ) -> None:
        super().__init__(error)
        self.status_code = status_code
        self.error = error
        self.detail = detail
        self.headers = headers or {}


class TrainerAlreadyRegistered(AtroposError):
    """The API already serves a trainer; pulling batches would take them away from it."""


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


class ServerDown(InferenceError):
    """The server could not be reached (connection refused/reset, timeout, 5xx after retries)."""


class ServerSlow(ServerDown):
    """The server answers its health probe but a request ran past its time limit: alive, generating
    slower than ``--openai.min_tokens_per_second`` allows."""


class ServerSilent(ServerDown):
    """The server accepts connections but, never seen working, answered nothing within its
    ``silence_limit``, not even a health probe."""


class BadRequest(InferenceError):
    """A request our inference engine refuses (the server side); its routes answer it as an
    OpenAI-shaped 4xx (``status``, default 400) naming ``param``."""

    def __init__(self, message: str, param: Optional[str] = None, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.param, self.status = message, param, status


class WeightTransferError(InferenceError):
    """Weights could not be pushed through an inference server's weight-transfer API: a server refused
    the set-up, or a step (an HTTP call, the rendezvous, a broadcast) failed or missed its deadline."""


class PromptTooLong(AtroposError, ValueError):
    """A prompt leaves no room for an answer within ``max_token_length``: that item cannot be asked
    as it is (an evaluation skips and counts it; see ``atroposlib.runtime.eval_items``)."""


class RunFailed(AtroposError):
    """A command ran but could not do its job (nothing produced, every attempt failed, a permanent
    error; a launched run whose component failed for good); the message is the one-line summary the
    CLI prints before exiting non-zero."""


class StopRequested(AtroposError):
    """A launched run was asked to stop (Ctrl-C, SIGTERM or ``atropos-launch stop``); the launcher
    stops every component and exits 128 + the signal."""


class HelpRequested(AtroposError):
    """Raised by ``load_config`` when ``--help`` was given; ``str(exc)`` is the help text."""


class TokenizerMismatch(AtroposError):
    """Two components that must share a tokenizer (e.g. teacher and student) do not."""


class TeacherSetupError(ConfigError, ValueError):
    """The teacher is missing or cannot be used (no servers, another tokenizer); one line on the
    command line, and a ``ValueError`` as in Atropos."""


class TeacherTokenizerMismatch(TeacherSetupError, TokenizerMismatch):
    """The teacher's tokenizer maps some token to another id than the student's."""


class ModelLoadError(AtroposError):
    """A model or tokenizer directory is missing, incomplete or unreadable."""


class WorkerTimeout(AtroposError):
    """An item's rollout ran past ``--env.worker_timeout`` and was cancelled (it is retried)."""


class TokenDrift(AtroposError):
    """A managed episode's next turn would not re-render to the tokens the model saw, and the
    session drops such episodes (``on_token_drift='drop'``): the episode ends here, counted."""


class RewardUnavailable(AtroposError):
    """Scoring failed for infrastructure reasons (grader down, sandbox failure): not a 0 reward."""


class EpisodeError(AtroposError):
    """An OpenEnv episode that cannot go on (``atroposlib.interop.openenv``); ``kind`` is one of
    ``KINDS``, whose words the env's one log line per kind uses."""

    KINDS: ClassVar[dict[str, str]] = {
        "unreachable": "could not be reached",
        "timeout": "did not answer in time",
        "closed": "closed the connection mid-episode",
        "refused": "refused the session (at capacity)",
        "malformed": "sent a malformed frame",
        "error": "answered with an error",
        "empty": "ended the episode before the first step",
        "too_long": "gave a first observation longer than max_token_length",
    }

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"openenv server {self.KINDS[kind]}: {detail}")
        self.kind, self.detail = kind, detail


class EpisodeOver(AtroposError):
    """A step on an OpenEnv episode we serve after it ended (or before any reset)."""


class EpisodeFailed(AtroposError):
    """A verifiers episode that cannot become training data (``atroposlib.interop.verifiers``;
    ``kind`` is a key of its ``KINDS``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class NotAHarborTask(ConfigError):
    """A folder given as a Harbor task is not one (``atroposlib.interop.harbor``): the one-line message
    names the folder and the file that is missing or unreadable."""


class SandboxFailure(AtroposError):
    """A Harbor task's sandbox could not do its part (``atroposlib.interop.harbor``): it refused the
    task, could not start, or its verifier crashed or wrote no reward. ``kind`` is a key of
    ``KINDS``; an episode that meets one has an unavailable reward, never a 0."""

    KINDS: ClassVar[dict[str, str]] = {
        "refused": "the sandbox cannot run this task",
        "start": "the sandbox failed to start",
        "verifier": "the verifier crashed or timed out",
        "no_reward": "the verifier wrote no usable reward",
        "runtime": "the sandbox's runtime failed mid-episode",
    }

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


__all__ = [
    "APIError",
    "APIUnavailable",
    "ApiProblem",
    "AtroposError",
    "AuthError",
    "BadRequest",
    "BatchUndeliverable",
    "ConfigError",
    "EpisodeError",
    "EpisodeFailed",
    "EpisodeOver",
    "HelpRequested",
    "InferenceError",
    "InferenceRejected",
    "InferenceUnavailable",
    "ModelLoadError",
    "NotAHarborTask",
    "PromptTooLong",
    "RewardUnavailable",
    "RunFailed",
    "SandboxFailure",
    "SchemaError",
    "ServerDown",
    "ServerSilent",
    "ServerSlow",
    "StopRequested",
    "TeacherSetupError",
    "TeacherTokenizerMismatch",
    "TokenDrift",
    "TokenizerMismatch",
    "TrainerAlreadyRegistered",
    "WeightTransferError",
    "WorkerTimeout",
]
