"""The topology file: one description of a run (API, inference servers, env workers, trainer).

A topology names what runs and how many; it never names a URL or a port that another component must
repeat: the launcher (``atroposlib.launch.plan``) fills those in. Every section is a pydantic model with
``extra="forbid"``, so a typo is one line with a "did you mean". ``load_topology`` reads the YAML.

Strings in flags, args and prepare commands may use ``{out}`` (the run directory) and ``{python}``
(the launcher's Python).
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from atroposlib.errors import ConfigError
from atroposlib.utils.yaml_config import load_yaml_mapping

InferenceKind = Literal["engine", "vllm", "sglang", "external"]
FlagValue = Union[str, int, float, bool, None, list[Any]]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)


class ApiSpec(_Strict):
    """The trajectory API (``run-api``)."""

    port: int = Field(
        8000, ge=0, le=65535, description="Port on cluster backends (local: a free one)."
    )
    flags: dict[str, FlagValue] = Field(
        {}, description="run-api flags (ApiSettings fields, e.g. max_staleness: 2)."
    )
    node: int = Field(0, ge=0, description="Cluster backends: the node index it runs on.")

    @model_validator(mode="after")
    def _no_filled_flags(self) -> ApiSpec:
        from atroposlib.api.settings import ApiSettings

        for key in self.flags:
            if key in ("host", "port", "data_dir"):
                raise ValueError(f"flags.{key} is set by the launcher")
            if key not in ApiSettings.model_fields:
                raise ValueError(
                    f"flags.{key}: not a run-api setting{_close(key, ApiSettings.model_fields)}"
                )
        return self


class InferenceSpec(_Strict):
    """A group of identical inference servers."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="Group name (logs, status).")
    kind: InferenceKind = Field(description="engine (ours), vllm, sglang or external.")
    model: Optional[str] = Field(None, description="Model path or id served (not for external).")
    served_name: str = Field("policy", description="The model name envs ask for.")
    count: int = Field(1, ge=1, description="How many servers of this group.")
    gpus: int = Field(0, ge=0, description="GPUs per server.")
    tensor_parallel: int = Field(1, ge=1, description="Tensor-parallel size (vllm, sglang).")
    port: int = Field(9001, ge=0, le=65535, description="First port on cluster backends.")
    args: list[str] = Field([], description="Extra command-line arguments of the server.")
    urls: list[str] = Field([], description="external: the servers' base URLs.")
    refresh: bool = Field(True, description="The trainer pushes new weights to these servers.")
    startup_timeout: float = Field(600.0, gt=0, description="Seconds to wait for /health.")
    node: Optional[int] = Field(None, ge=0, description="Cluster backends: pin to this node.")

    @model_validator(mode="after")
    def _check(self) -> InferenceSpec:
        if self.kind == "external":
            if not self.urls:
                raise ValueError("kind external needs urls: [http://HOST:PORT, ...]")
            if self.model is not None or self.gpus:
                raise ValueError("kind external takes urls only (no model, no gpus)")
        else:
            if self.urls:
                raise ValueError(f"urls is only for kind external (this group is {self.kind})")
            if not self.model:
                raise ValueError(f"kind {self.kind} needs model: PATH_OR_ID")
        if self.kind == "engine" and self.tensor_parallel > 1:
            raise ValueError("kind engine has no tensor parallelism (tensor_parallel must be 1)")
        if self.gpus and self.tensor_parallel > self.gpus:
            raise ValueError(f"tensor_parallel {self.tensor_parallel} > gpus {self.gpus}")
        return self

    @property
    def servers(self) -> int:
        return len(self.urls) if self.kind == "external" else self.count


class EnvSpec(_Strict):
    """A group of env workers running one env file's ``serve``."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="Group name (logs, status).")
    file: str = Field(description="The env file (python FILE serve).")
    config: Optional[str] = Field(None, description="The env's --config YAML.")
    flags: dict[str, Any] = Field(
        {}, description="The env's flags: {env: {group_size: 8}, openai: {model_name: policy}}."
    )
    replicas: int = Field(1, ge=1, description="How many workers.")
    inference: Optional[list[str]] = Field(
        None, description="Inference groups this env uses (default: all)."
    )
    node: int = Field(0, ge=0, description="Cluster backends: the node index they run on.")


class TrainerSpec(_Strict):
    """The GRPO trainer (``example_trainer.grpo``), torchrun when it has more than one process."""

    module: str = Field("example_trainer.grpo", description="The trainer's Python module.")
    config: Optional[str] = Field(None, description="The trainer's --config YAML.")
    flags: dict[str, FlagValue] = Field(
        {}, description="Trainer flags (TrainingConfig fields, e.g. training_steps: 3)."
    )
    nnodes: int = Field(1, ge=1, description="Nodes the trainer spans.")
    nproc_per_node: int = Field(1, ge=1, description="Trainer processes per node.")
    gpus_per_node: int = Field(0, ge=0, description="GPUs the trainer uses on each node.")
    rdzv_port: int = Field(29500, ge=1, le=65535, description="torchrun rendezvous port.")
    node: Optional[int] = Field(None, ge=0, description="Cluster backends: its first node.")

    @model_validator(mode="after")
    def _no_filled_flags(self) -> TrainerSpec:
        for key in self.flags:
            if key in ("api_url", "inference_urls", "resume"):
                raise ValueError(f"flags.{key} is set by the launcher")
        return self


class PrepareStep(_Strict):
    """A command run once before anything starts (e.g. building a model)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    argv: list[str] = Field(min_length=1, description="The command, one argument per item.")
    creates: Optional[str] = Field(None, description="Skipped when this path already exists.")


class Supervision(_Strict):
    """Restarts of crashed env workers and inference servers."""

    max_restarts: int = Field(5, ge=0, description="Crashes tolerated within window_minutes.")
    window_minutes: float = Field(10.0, gt=0, description="The window crashes are counted in.")
    backoff_s: float = Field(1.0, ge=0, description="First restart delay; doubles per crash.")
    max_backoff_s: float = Field(30.0, ge=0, description="Longest restart delay.")
    stop_timeout_s: float = Field(15.0, gt=0, description="SIGTERM grace before SIGKILL.")
    progress_timeout_s: float = Field(
        1800.0,
        ge=0,
        description="End the run, naming the component that stopped, when the trainer makes no "
        "step for this long after it starts (0: never).",
    )
    unresponsive_s: float = Field(
        60.0,
        gt=0,
        description="Ray: a component whose actor does not answer for this long ends the run "
        "(shorter outages, a network blip, are waited out).",
    )


class ClusterSpec(_Strict):
    """The allocation on cluster backends (ignored by the local backend)."""

    nodes: int = Field(1, ge=1)
    gpus_per_node: int = Field(0, ge=0)
    cpus_per_node: Optional[int] = Field(None, ge=1)
    partition: Optional[str] = None
    account: Optional[str] = None
    time: Optional[str] = Field(None, description="SLURM time limit, e.g. 04:00:00.")
    sbatch: list[str] = Field([], description="Extra #SBATCH lines (without the prefix).")
    setup: list[str] = Field([], description="Shell lines run first in the job (module load ...).")
    loopback: bool = Field(
        False,
        description="One-node allocations: listen on and address 127.0.0.1 instead of the node's "
        "name on every interface (test clusters on one host).",
    )
    ray_nodes: list[str] = Field(
        [],
        description="Ray: the resource standing for node 0, 1, ... (a custom resource such as node_a, "
        "or Ray's own node:IP); empty: Ray places every component itself.",
    )

    @model_validator(mode="after")
    def _loopback_is_one_node(self) -> ClusterSpec:
        if self.loopback and self.nodes != 1:
            raise ValueError("loopback needs nodes: 1")
        if self.ray_nodes and len(self.ray_nodes) != self.nodes:
            raise ValueError(
                f"ray_nodes names {len(self.ray_nodes)} node(s): set nodes: {len(self.ray_nodes)}"
            )
        if len(set(self.ray_nodes)) != len(self.ray_nodes):
            raise ValueError("ray_nodes names one resource twice")
        return self


class Topology(_Strict):
    """The whole run."""

    name: str = Field("atropos", pattern=r"^[A-Za-z0-9_.-]+$")
    env: dict[str, str] = Field({}, description="Environment variables of every component.")
    prepare: list[PrepareStep] = []
    api: ApiSpec = ApiSpec()
    inference: list[InferenceSpec] = Field(min_length=1)
    envs: list[EnvSpec] = Field(min_length=1)
    trainer: TrainerSpec
    supervision: Supervision = Supervision()
    cluster: ClusterSpec = ClusterSpec()

    @model_validator(mode="after")
    def _check(self) -> Topology:
        names = [g.name for g in self.inference]
        for group in (names, [e.name for e in self.envs]):
            dup = {n for n in group if group.count(n) > 1}
            if dup:
                raise ValueError(f"group name {sorted(dup)[0]!r} is used twice")
        for e in self.envs:
            for n in e.inference or []:
                if n not in names:
                    raise ValueError(
                        f"envs {e.name}: unknown inference group {n!r}{_close(n, names)}"
                    )
        return self

    def gpus_wanted(self) -> int:
        """GPUs the whole run asks for."""
        inf = sum(g.gpus * g.count for g in self.inference if g.kind != "external")
        return inf + self.trainer.gpus_per_node * self.trainer.nnodes


def _close(name: str, known: Any) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def parse_topology(data: dict[str, Any], source: str = "topology") -> Topology:
    """Validate a mapping; a mistake raises ``ConfigError`` with one line naming the field."""
    try:
        return Topology.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{source}: {_describe(e)}") from None


def _model_at(path: tuple[Any, ...]) -> Optional[type[BaseModel]]:
    """The section model that holds the last element of ``path`` (list items unwrapped)."""
    cls: Any = Topology
    for part in path:
        if isinstance(part, int):
            continue
        is_model = isinstance(cls, type) and issubclass(cls, BaseModel)
        field = cls.model_fields.get(part) if is_model else None
        if field is None:
            return None
        ann = field.annotation
        args = typing.get_args(ann)
        cls = args[0] if typing.get_origin(ann) is list and args else ann
    return cls if isinstance(cls, type) and issubclass(cls, BaseModel) else None


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "top level"


def _describe(e: ValidationError) -> str:
    """One line naming each bad field; unknown keys get a "did you mean"."""
    parts = []
    for err in e.errors():
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden" and loc:
            section = _model_at(loc[:-1])
            known = list(section.model_fields) if section is not None else []
            parts.append(f"{_where(loc)}: unknown key{_close(str(loc[-1]), known)}")
            continue
        msg = str(err["msg"]).removeprefix("Value error, ")
        got = "" if err["type"] in ("value_error", "missing") else f" (got {err['input']!r})"
        parts.append(f"{_where(loc)}: {msg}{got}")
    return "; ".join(parts)


def load_topology(path: Union[str, Path]) -> Topology:
    """Read and validate the topology YAML at ``path``."""
    return parse_topology(load_yaml_mapping(path, flag="topology"), source=str(path))


__all__ = [
    "ApiSpec",
    "ClusterSpec",
    "EnvSpec",
    "InferenceSpec",
    "PrepareStep",
    "Supervision",
    "Topology",
    "TrainerSpec",
    "load_topology",
    "parse_topology",
]
