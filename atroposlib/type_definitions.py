"""The wire schema: every shape that crosses a process boundary, defined once.

The trajectory API server, its typed client, the environment runtime, the trainer and the tools all
import from here; this module imports nothing from the rest of the package but the leaf
``history_types`` (Atropos's ``GameHistory`` family, re-exported here).

Two views of a scored group exist on purpose:

* ``ScoredDataGroup`` / ``ScoredDataItem`` are ``TypedDict`` s, exactly as in Atropos, so environment
  code that does ``scores = ScoredDataGroup(); scores["tokens"] = []`` keeps working unchanged.
* ``ScoredData`` is the validated pydantic model of the same keys (a test keeps the two in step). It is
  what ``POST /scored_data`` accepts and what the runtime checks before sending. It accepts everything
  Atropos accepts (odd roles, extra keys, unicode, images) but refuses what would corrupt training:
  an empty group, ragged per-token lists, a score count different from the group size, NaN/inf.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Optional, TypedDict, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Atropos defines these here, and env files import them from here:
from atroposlib.history_types import AgentHistory, AgentStep, GameHistory, GameStep, Observation

# ----------------------------------------------------------------------------------------------
# Small aliases kept for Atropos compatibility (`from atroposlib.type_definitions import Item, number`)
# ----------------------------------------------------------------------------------------------
number = Union[int, float]
Item = Any
UUID = str
RewardStatus = Literal["ok", "unavailable"]
MAX_TOKEN_ID = 2**63 - 1  # token ids are int64 in every trainer
MAX_INT64 = 2**63 - 1
"""The largest integer SQLite (and every trainer's int64) holds: integer fields the API stores are
bounded by it, so both of its stores accept and refuse the same inputs."""
MAX_STEP = 2**62
"""The largest ``starting_step`` (and step count): the step grows by one per batch and stays far
inside ``MAX_INT64``."""
MAX_BATCH_SEQUENCES = 1_000_000
"""The most sequences a batch or an env's group may hold (``batch_size``, ``group_size``): the packer
sizes its subset-sum bitsets by them, so a registration cannot make each ``/batch`` allocate gigabytes."""
MAX_CONTEXT_TOKENS = 2**31 - 1
"""The longest context a trainer or an env may declare (``max_token_len``, ``max_token_length``)."""
MAX_ENV_WEIGHT = 1e6
"""The largest env weight: weights are relative, and a huge one (``1e308``) overflows Atropos's
weight formula to infinity, which floors every env's weight at 0.01."""
MAX_GROUP_DEPTH = 128
"""How deeply a stored group may nest (the group object is level 1). A trainer that parses batches with
Python's standard ``json`` fails near 1,000 levels, orjson writes at most 254: 128 leaves both room."""
Int64 = Annotated[int, Field(ge=-MAX_INT64 - 1, le=MAX_INT64)]

MASK_IGNORE = -100
"""Value in ``masks`` for a token that is not trained on (prompt, tool output, user turn)."""


def first_trained(masks: Sequence[int]) -> Optional[int]:
    """Index of the first trained token (mask not ``MASK_IGNORE``); None when nothing is trained."""
    return next((j for j, m in enumerate(masks) if m != MASK_IGNORE), None)


class Message(TypedDict, total=False):
    """A chat message as envs build it. Any role string is accepted; extra keys are kept."""

    role: str
    content: Any
    reward: Optional[float]


class ScoredDataItem(TypedDict, total=False):
    """One scored sequence, returned by ``BaseEnv.collect_trajectory``; the runtime groups them."""

    tokens: list[int]
    masks: list[int]
    scores: float
    advantages: Optional[list[float]]
    ref_logprobs: Optional[list[float]]
    messages: Optional[list[Message]]
    group_overrides: Optional[dict[str, Any]]
    overrides: Optional[dict[str, Any]]
    images: Optional[Any]
    inference_logprobs: Optional[list[float]]
    distill_token_ids: Optional[list[list[int]]]
    distill_logprobs: Optional[list[list[float]]]
    reward_status: Optional[RewardStatus]
    overlong: Optional[bool]
    weights_versions: Optional[list[int]]


class ScoredDataGroup(TypedDict, total=False):
    """A group of scored sequences for one item (same prompt), as envs build it (Atropos shape)."""

    tokens: list[list[int]]
    masks: list[list[int]]
    scores: list[float]
    advantages: Optional[list[list[float]]]
    ref_logprobs: Optional[list[list[float]]]
    messages: Optional[list[list[Message]]]
    generation_params: Optional[dict[str, Any]]
    inference_logprobs: Optional[list[list[float]]]
    overrides: Optional[list[dict[str, Any]]]
    group_overrides: Optional[dict[str, Any]]
    images: Optional[Any]
    env_id: Optional[int]
    distill_token_ids: Optional[list[list[list[int]]]]
    distill_logprobs: Optional[list[list[list[float]]]]
    policy_version: Optional[int]
    group_id: Optional[str]
    reward_status: Optional[RewardStatus]
    reward_statuses: Optional[list[RewardStatus]]
    overlong: Optional[list[bool]]
    weights_versions: Optional[list[list[int]]]


# ----------------------------------------------------------------------------------------------
# The validated wire model of a group
# ----------------------------------------------------------------------------------------------
_PER_TOKEN_FIELDS = ("masks", "inference_logprobs", "advantages", "ref_logprobs")
_EMPTY_MEANS_ABSENT = (
    "advantages",
    "ref_logprobs",
    "messages",
    "inference_logprobs",
    "overrides",
    "distill_token_ids",
    "distill_logprobs",
    "reward_statuses",
    "overlong",
    "weights_versions",
)


_UINT64 = array("Q").itemsize == 8
_TOP_BYTE = 7 if sys.byteorder == "little" else 0
_BELOW_128 = bytes(range(128))


def _token_ids_in_range(tokens: list[list[int]]) -> bool:
    """Whether every token id is in 0 .. ``MAX_TOKEN_ID``, decided at C speed.

    All ids go into one uint64 array (a negative id, or one above 2**64-1, raises), in which no
    id may have its top bit set (>= 2**63): 0.15 ms for 16 x 2048 ids, where ``min`` + ``max`` of
    each sequence took 0.72 ms. False only says to look for the bad id (``_first_bad_token``)."""
    if not _UINT64:
        return all(min(seq) >= 0 and max(seq) <= MAX_TOKEN_ID for seq in tokens)
    ids = array("Q")
    try:
        for seq in tokens:
            ids.fromlist(seq)
    except (OverflowError, TypeError):
        return False
    return not ids.tobytes()[_TOP_BYTE::8].translate(None, _BELOW_128)


def _first_bad_token(seq: list[int]) -> Optional[int]:
    """Index of the first token id of ``seq`` outside 0 .. ``MAX_TOKEN_ID`` (None: all in range)."""
    return next((j for j, t in enumerate(seq) if not 0 <= t <= MAX_TOKEN_ID), None)


def _check_finite(name: str, rows: Optional[list[list[float]]]) -> None:
    if rows is None:
        return
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            if not math.isfinite(v):
                raise ValueError(f"{name}[{i}][{j}] is {v}; only finite numbers are allowed")


class ScoredData(BaseModel):
    """A scored group on the wire (``POST /scored_data``). Same keys as ``ScoredDataGroup``."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    tokens: list[list[int]] = Field(
        description="Token ids of each sequence (prompt + completion), 0 <= id < 2**63."
    )
    masks: list[list[int]] = Field(
        description="Per token: the token id when trained on, -100 when not (prompt, tool output)."
    )
    scores: list[float] = Field(description="One reward per sequence.")
    advantages: Optional[list[list[float]]] = Field(
        None,
        description="Per-token advantages set by the env; the trainer computes them if absent.",
    )
    ref_logprobs: Optional[list[list[float]]] = Field(
        None, description="Per-token reference logprobs."
    )
    messages: Optional[list[list[dict[str, Any]]]] = Field(
        None, description="The conversation of each sequence (for viewers and SFT export)."
    )
    generation_params: Optional[dict[str, Any]] = Field(
        None, description="Sampling parameters used."
    )
    inference_logprobs: Optional[list[list[float]]] = Field(
        None, description="Per-token logprobs from the inference server, aligned with tokens."
    )
    overrides: Optional[list[dict[str, Any]]] = Field(
        None, description="Per-sequence trainer overrides."
    )
    group_overrides: Optional[dict[str, Any]] = Field(
        None, description="Group-level trainer overrides."
    )
    images: Optional[Any] = Field(
        None, description="Images for multimodal groups (opaque to the API)."
    )
    env_id: Optional[Int64] = Field(None, description="Id returned by /register-env.")
    distill_token_ids: Optional[list[list[list[int]]]] = Field(
        None, description="Per sequence, per token: the teacher's top-k token ids."
    )
    distill_logprobs: Optional[list[list[list[float]]]] = Field(
        None, description="Per sequence, per token: the teacher's top-k logprobs."
    )
    policy_version: Optional[int] = Field(
        None,
        ge=0,
        le=MAX_INT64,
        description="Version (trainer step) of the oldest weights that generated a token of this "
        "group, as the inference server reported it; when the server reports none, the trainer "
        "step the env saw when the item started (an estimate).",
    )
    group_id: Optional[str] = Field(
        None,
        max_length=200,
        description="Client-chosen id; a retried POST with it is not queued twice.",
    )
    reward_status: Optional[RewardStatus] = Field(
        None,
        description="'unavailable' when scoring failed for infrastructure reasons; never trained as 0.",
    )
    reward_statuses: Optional[list[RewardStatus]] = Field(
        None,
        description="Per sequence: 'unavailable' when that sequence could not be scored (its score "
        "is then a placeholder, the mean of the others); the trainer leaves it out. Absent: all ok.",
    )
    overlong: Optional[list[bool]] = Field(
        None,
        description="Per sequence: whether its last reply was cut at max_tokens (finish_reason "
        "'length'); the trainer keeps, masks or penalizes it (--overlong). Absent: unknown.",
    )
    weights_versions: Optional[list[list[int]]] = Field(
        None,
        description="Per sequence: [first, last] weights version (trainer step) that generated its "
        "tokens, as the inference server reported it (first < last: a refresh happened while it "
        "was generated).",
    )

    @field_validator("messages", mode="before")
    @classmethod
    def _messages_have_role_and_content(cls, v: Any) -> Any:
        if v is None:
            return v
        if not isinstance(v, list):
            raise ValueError("messages must be a list (one conversation per sequence)")
        for i, conv in enumerate(v):
            if not isinstance(conv, list):
                raise ValueError(f"messages[{i}] must be a list of messages")
            for j, msg in enumerate(conv):
                if not isinstance(msg, dict) or "role" not in msg or "content" not in msg:
                    raise ValueError(
                        f"messages[{i}][{j}] must be an object with 'role' and 'content'"
                    )
        return v

    @model_validator(mode="after")
    def _shapes_agree(self) -> ScoredData:
        n = len(self.tokens)
        if n == 0:
            raise ValueError("empty group: tokens has no sequences")
        for i, seq in enumerate(self.tokens):
            if len(seq) == 0:
                raise ValueError(f"tokens[{i}] is empty")
        if not _token_ids_in_range(self.tokens):
            for i, seq in enumerate(self.tokens):
                j = _first_bad_token(seq)
                if j is not None:
                    raise ValueError(f"tokens[{i}][{j}] is {seq[j]}; token ids are 0 .. 2**63-1")
        if len(self.scores) != n:
            raise ValueError(
                f"scores has {len(self.scores)} entries but the group has {n} sequences"
            )
        for name in _PER_TOKEN_FIELDS:
            rows = getattr(self, name)
            if rows is None:
                continue
            if len(rows) != n:
                raise ValueError(f"{name} has {len(rows)} sequences but tokens has {n}")
            for i, (row, seq) in enumerate(zip(rows, self.tokens, strict=False)):
                if len(row) != len(seq):
                    raise ValueError(
                        f"{name}[{i}] has {len(row)} values but tokens[{i}] has {len(seq)} tokens"
                    )
        for name in (
            "overrides",
            "messages",
            "distill_token_ids",
            "distill_logprobs",
            "reward_statuses",
            "overlong",
            "weights_versions",
        ):
            rows = getattr(self, name)
            if rows is not None and len(rows) != n:
                raise ValueError(f"{name} has {len(rows)} entries but the group has {n} sequences")
        if self.weights_versions is not None:
            for i, span in enumerate(self.weights_versions):
                if len(span) != 2 or not 0 <= span[0] <= span[1]:
                    raise ValueError(
                        f"weights_versions[{i}] is {span}; each must be [first, last] with "
                        "0 <= first <= last"
                    )
        if (self.distill_token_ids is None) != (self.distill_logprobs is None):
            raise ValueError("distill_token_ids and distill_logprobs must be given together")
        if self.distill_token_ids is not None and self.distill_logprobs is not None:
            for i, (ids, lps, seq) in enumerate(
                zip(self.distill_token_ids, self.distill_logprobs, self.tokens, strict=False)
            ):
                if len(ids) != len(seq) or len(lps) != len(seq):
                    raise ValueError(
                        f"distill_token_ids[{i}]/distill_logprobs[{i}] must have one entry per token "
                        f"({len(seq)})"
                    )
                for j, (a, b) in enumerate(zip(ids, lps, strict=False)):
                    if len(a) != len(b):
                        raise ValueError(
                            f"distill_token_ids[{i}][{j}] has {len(a)} ids but distill_logprobs has {len(b)}"
                        )
        # allow_inf_nan=False covers floats parsed by pydantic; this guards values set after parsing.
        _check_finite("scores", [self.scores])
        return self

    def as_group(self) -> ScoredDataGroup:
        """The plain dict (``ScoredDataGroup``) view, without unset optional keys."""
        return self.model_dump(exclude_none=True)  # type: ignore[return-value]


def validate_group(group: Union[ScoredDataGroup, dict[str, Any]]) -> ScoredData:
    """Validate an env-built group; raises ``pydantic.ValidationError`` naming the field and index.

    An optional per-sequence field left as an empty list (as Atropos's default group builder and
    its ``process`` files leave ``advantages: []``) counts as absent."""
    if any(group.get(k) == [] for k in _EMPTY_MEANS_ABSENT) and group.get("tokens"):
        group = {k: v for k, v in group.items() if not (k in _EMPTY_MEANS_ABSENT and v == [])}
    return ScoredData.model_validate(group)


# ----------------------------------------------------------------------------------------------
# Trajectory API requests and responses (Atropos 0.4 shapes; new fields are optional)
# ----------------------------------------------------------------------------------------------
class Registration(BaseModel):
    """``POST /register``: the trainer announces itself and the run's shape."""

    model_config = ConfigDict(extra="allow")

    wandb_group: str = ""
    wandb_project: str = ""
    batch_size: int = Field(gt=0, le=MAX_BATCH_SEQUENCES, description="Sequences per batch.")
    max_token_len: int = Field(
        gt=0, le=MAX_CONTEXT_TOKENS, description="Longest sequence the trainer accepts."
    )
    checkpoint_dir: str = ""
    save_checkpoint_interval: Int64 = 0
    starting_step: int = Field(
        0, ge=0, le=MAX_STEP, description="Step the trainer starts (or resumes) at."
    )
    num_steps: int = Field(0, ge=0, le=MAX_STEP, description="Total training steps planned.")
    run_id: Optional[str] = Field(
        None,
        max_length=200,
        description="Names the run (ours); a different run cannot take over undelivered groups.",
    )
    weights_lag: Optional[int] = Field(
        None,
        ge=0,
        le=MAX_STEP,
        description="Steps by which the inference servers' weights can trail the trainer when a "
        "batch is formed (ours): refresh interval - 1, plus 1 when pushed asynchronously. The API "
        "keeps envs' off-policy budgets within max_staleness with it.",
    )


class RegisterResponse(BaseModel):
    """``POST /register``'s answer: a random id for the registering trainer (Atropos's shape)."""

    uuid: int


class RegisterEnv(BaseModel):
    """``POST /register-env``: an environment joins the run."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    max_token_length: int = Field(gt=0, le=MAX_CONTEXT_TOKENS)
    desired_name: str = Field(min_length=1, max_length=200)
    weight: float = Field(1.0, ge=0.0, le=MAX_ENV_WEIGHT)
    group_size: int = Field(gt=0, le=MAX_BATCH_SEQUENCES)
    min_batch_allocation: Optional[float] = Field(
        None, ge=0.0, le=1.0, description="Minimum fraction of each batch reserved for this env."
    )


class RegisterEnvResponse(BaseModel):
    """Atropos returns ``{"status": "wait for trainer to start"}`` until the trainer's first /batch."""

    model_config = ConfigDict(extra="allow")

    status: str
    env_id: Optional[int] = None
    wandb_name: Optional[str] = None
    checkpoint_dir: Optional[str] = None
    starting_step: Optional[int] = None
    checkpoint_interval: Optional[int] = None
    num_steps: Optional[int] = None


class EnvIdentifier(BaseModel):
    """``POST /disconnect-env`` and ``GET /status-env``: which env."""

    env_id: int = Field(ge=0, le=MAX_INT64)


class DisconnectEnvResponse(BaseModel):
    """``POST /disconnect-env``: ``success``, or (Atropos's answer for an unknown env, still a 200)
    ``failure`` with the ``error``."""

    status: Literal["success", "failure"]
    error: Optional[str] = None


class Info(BaseModel):
    """``GET /info``: the registered trainer's batch shape (-1 before any registration)."""

    batch_size: int = -1
    max_token_len: int = -1


class WandbInfo(BaseModel):
    """``GET /wandb_info``: the trainer's wandb group and project (null before registration)."""

    model_config = ConfigDict(extra="allow")

    group: Optional[str] = None
    project: Optional[str] = None


class EnvQueueStatus(BaseModel):
    """One env's line in ``/status`` ``queued_by_env``."""

    sequences: int = Field(description="Sequences of this env waiting in the queue.")
    oldest_wait_s: float = Field(description="How long its oldest queued group has waited.")


class EnvGroupCounts(BaseModel):
    """One env's line in ``/status`` ``groups_by_env``: its groups since run-api started."""

    received: int = Field(0, description="Groups accepted from this env.")
    delivered: int = Field(0, description="Groups of this env handed out in batches.")
    stale_dropped: int = Field(0, description="Groups of this env dropped for age.")


class Status(BaseModel):
    """``GET /status``. Atropos's API answers only ``current_step`` and ``queue_size``; the other
    fields are ours, so they default when a client reads an Atropos server."""

    model_config = ConfigDict(extra="allow")

    current_step: int
    queue_size: int = Field(description="Groups in the queue.")
    queued_sequences: int = Field(0, description="Sequences in the queue.")
    buffered_sequences: int = Field(0, description="Sequences held in mixed-size env buffers.")
    registered: bool = Field(False, description="A trainer has registered.")
    started: bool = Field(False, description="The trainer has asked for its first batch.")
    pending_batch: Optional[str] = Field(
        None, description="The batch handed out and not yet acknowledged."
    )
    blocked_by: Optional[str] = Field(
        None, description="Why the next /batch would come back empty (None when it would not)."
    )
    max_staleness: Optional[int] = None
    stale_dropped_by_env: dict[str, int] = Field(default_factory=dict)
    stale_dropped_by_length: dict[str, int] = Field(default_factory=dict)
    queued_by_env: dict[str, EnvQueueStatus] = Field(default_factory=dict)
    groups_by_env: dict[str, EnvGroupCounts] = Field(
        default_factory=dict,
        description="Per env: groups received, delivered and dropped for age since run-api started.",
    )
    queued_by_length: dict[str, int] = Field(default_factory=dict)
    repaired_fields: dict[str, int] = Field(
        default_factory=dict, description="Atropos field repairs done at ingest, by field."
    )
    quarantined_groups: int = Field(
        0, description="Groups retired because their payload could not be delivered."
    )
    ack_mode: Literal["implicit", "explicit"] = "implicit"


class StatusEnv(BaseModel):
    """``GET /status-env``: an env's view of the queue (Atropos's shape)."""

    model_config = ConfigDict(extra="allow")

    current_step: int
    queue_size: int
    unallocated_fraction: float = 1.0
    self_queue_size: int = 0
    max_group_size: int = 1
    env_weight: float = 1.0
    max_staleness: Optional[int] = Field(
        None, description="The API's staleness bound in steps (ours; None: no bound)."
    )
    max_batches_offpolicy: Optional[int] = Field(
        None,
        description="Most batches this env may hold ahead of the trainer for its groups to stay "
        "within max_staleness (ours; None: no limit from the API).",
    )
    batch_share: Optional[float] = Field(
        None,
        description="The fraction of every batch the API guarantees this env (ours: its "
        "min_batch_allocation, or its weight's share under run-api --batch-shares weight).",
    )


class BatchResponse(BaseModel):
    """``GET /batch``: ``batch`` is None when no full batch is ready. ``batch_id`` is ours (ack)."""

    model_config = ConfigDict(extra="allow")

    batch: Optional[list[dict[str, Any]]] = None
    batch_id: Optional[str] = None
    step: Optional[int] = None


class BatchAck(BaseModel):
    """``POST /batch/ack``: the trainer has applied the batch; it will not be redelivered."""

    batch_id: str = Field(min_length=1)


class BatchAckResponse(BaseModel):
    """``POST /batch/ack``'s answer: ``step`` when the outstanding batch was acked now,
    ``already_acked`` when it had been before (acking twice is harmless)."""

    status: Literal["acked"]
    batch_id: str
    step: Optional[int] = None
    already_acked: Optional[bool] = None


class ScoredDataResponse(BaseModel):
    """``POST /scored_data``: ``received`` (queued; ``duplicate`` when its ``group_id`` was seen
    before) or ``buffered`` (held until the env's group size is reached; ``buffer_size``)."""

    model_config = ConfigDict(extra="allow")

    status: str
    buffer_size: Optional[int] = None
    duplicate: Optional[bool] = None


class ScoredDataListResponse(BaseModel):
    """``POST /scored_data_list``: all groups committed; ``duplicates`` counts repeated group_ids."""

    model_config = ConfigDict(extra="allow")

    status: str
    groups_processed: int
    duplicates: Optional[int] = None


class PeekedGroup(BaseModel):
    """One group as read-only tools see it (``GET /peek``); reading never consumes it."""

    seq: int = Field(description="Monotonic ingest sequence number.")
    received_at: float = Field(description="Unix time the API committed the group.")
    env_name: Optional[str] = None
    state: Literal["queued", "buffered", "delivered", "acked", "dropped"] = "queued"
    group: dict[str, Any]


class PeekResponse(BaseModel):
    groups: list[PeekedGroup]
    next_seq: int = Field(description="Pass as `after` to get only newer groups.")


class StatusMessage(BaseModel):
    """A bare acknowledgement, e.g. ``POST /reset``'s ``{"status": "reset"}``."""

    status: str


class RootResponse(BaseModel):
    """``GET /``: Atropos's greeting."""

    message: str


class Health(BaseModel):
    """``GET /health`` (no token needed): the store behind the API and the current step."""

    status: Literal["ok"]
    store: str
    durable: bool
    step: int


class ErrorResponse(BaseModel):
    """Body of every 4xx/5xx on non-legacy endpoints."""

    error: str
    detail: Any = None


__all__ = [
    "MASK_IGNORE",
    "MAX_BATCH_SEQUENCES",
    "MAX_CONTEXT_TOKENS",
    "MAX_ENV_WEIGHT",
    "MAX_GROUP_DEPTH",
    "MAX_INT64",
    "MAX_STEP",
    "Int64",
    "AgentHistory",
    "AgentStep",
    "GameHistory",
    "GameStep",
    "Observation",
    "BatchAck",
    "BatchAckResponse",
    "BatchResponse",
    "DisconnectEnvResponse",
    "EnvGroupCounts",
    "EnvIdentifier",
    "EnvQueueStatus",
    "ErrorResponse",
    "Health",
    "Info",
    "Item",
    "Message",
    "PeekResponse",
    "PeekedGroup",
    "RegisterEnv",
    "RegisterEnvResponse",
    "RegisterResponse",
    "Registration",
    "RewardStatus",
    "RootResponse",
    "ScoredData",
    "ScoredDataGroup",
    "ScoredDataItem",
    "ScoredDataListResponse",
    "ScoredDataResponse",
    "Status",
    "StatusEnv",
    "StatusMessage",
    "UUID",
    "WandbInfo",
    "ATROPOS_GROUP_KEYS",
    "GROUP_KEYS",
    "number",
    "validate_group",
]


def per_sequence_fields() -> tuple[str, ...]:
    """The optional ``ScoredData`` fields with one entry per sequence (``advantages``, ``messages``,
    ``inference_logprobs``, ...): the optional fields typed as lists, in schema order."""
    import typing

    return tuple(
        name
        for name, info in ScoredData.model_fields.items()
        if not info.is_required()
        and any(typing.get_origin(a) is list for a in typing.get_args(info.annotation))
    )


__all__ += ["per_sequence_fields"]

# The group's key lists, derived from ``ScoredDataGroup`` (its declaration order) for the API side.
GROUP_KEYS: tuple[str, ...] = tuple(ScoredDataGroup.__annotations__)
# Atropos 0.4's keys, which its API put in every queued group (None when absent): the schema's keys
# up to ``env_id``; those after it are later optional extensions, stored only when sent.
ATROPOS_GROUP_KEYS: tuple[str, ...] = GROUP_KEYS[: GROUP_KEYS.index("env_id") + 1]
