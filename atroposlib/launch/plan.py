"""A topology resolved into components: their commands, URLs, ports, nodes and GPUs.

The plan is what every backend runs. Hosts are written as ``@NODEk@`` (node k of the allocation), which
the local backend replaces with 127.0.0.1 and the SLURM script with the k-th host name it resolves inside
the job. Ports: free loopback ports on the local backend, the topology's ports on a cluster. On Ray, a
server listens on ``@HOST@`` (the node Ray placed it on) and every ``@NODEk@:PORT`` of the plan (ports
unique over the whole plan) is replaced by the address and free port its Ray actor reports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

from atroposlib.errors import ConfigError
from atroposlib.launch.topology import EnvSpec, InferenceSpec, Topology
from atroposlib.utils.net import free_port

Role = Literal["prepare", "api", "inference", "env", "trainer"]
Backend = Literal["local", "slurm", "ray"]
# Roles in start order; stop order is the reverse (trainer first, API last).
START_ORDER: tuple[Role, ...] = ("api", "inference", "env", "trainer")


def node_host(k: int) -> str:
    """Node k's host in URLs: resolved by the backend (127.0.0.1 here, the k-th node in a job)."""
    return f"@NODE{k}@"


@dataclass
class Component:
    """One process the backend starts (an external inference server is listed, never started)."""

    name: str
    role: Role
    argv: list[str]
    nodes: list[int]
    env: dict[str, str] = field(default_factory=dict)
    url: Optional[str] = None
    health: Optional[str] = None
    gpus: list[int] = field(default_factory=list)
    restart: bool = False
    startup_timeout: float = 120.0
    external: bool = False
    creates: Optional[str] = None

    @property
    def log(self) -> str:
        return f"logs/{self.name}.log"


@dataclass
class Plan:
    topology: Topology
    out: Path
    backend: Backend
    components: list[Component]
    api_url: str
    metrics_source: Path
    nodes: int = 1

    def by_role(self, role: Role) -> list[Component]:
        return [c for c in self.components if c.role == role]


def local_gpu_count() -> int:
    """GPUs visible here: ``CUDA_VISIBLE_DEVICES`` when set, else ``nvidia-smi -L``, else 0."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip() and v.strip() != "-1"]
        return len(ids)
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def flag_args(flags: dict[str, Any]) -> list[str]:
    """``{training_steps: 3, use_wandb: false}`` -> ``--training-steps 3 --no-use-wandb``."""
    out: list[str] = []
    for key, value in flags.items():
        name = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            out.append(name if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, list):
            out += [name, *(str(v) for v in value)]
        elif value is None:
            continue
        else:
            out += [name, str(value)]
    return out


def _env_flat(flags: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{env: {group_size: 8}}`` -> ``{"env.group_size": 8}`` (dotted keys pass through)."""
    out: dict[str, Any] = {}
    for key, value in flags.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_env_flat(value, name + "."))
        else:
            out[name] = value
    return out


def _env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return "none" if value is None else str(value)


class _Placer:
    """GPU bookkeeping per node: which GPU indices each component gets."""

    def __init__(self, nodes: int, gpus_per_node: int) -> None:
        self.free = {k: list(range(gpus_per_node)) for k in range(nodes)}
        self.nodes = nodes

    def take(self, node: int, n: int, who: str) -> list[int]:
        if node >= self.nodes:
            raise ConfigError(f"{who}: node {node} is outside the {self.nodes}-node allocation")
        if n > len(self.free[node]):
            have = len(self.free[node])
            raise ConfigError(f"{who} asks for {n} GPUs on node {node}, which has {have} left")
        got, self.free[node] = self.free[node][:n], self.free[node][n:]
        return got

    def first_fit(self, n: int, who: str) -> int:
        for k in range(self.nodes):
            if len(self.free[k]) >= n:
                return k
        raise ConfigError(f"{who} asks for {n} GPUs; no node has that many left")


def _subst(text: str, out: Path) -> str:
    return text.replace("{out}", str(out)).replace("{python}", sys.executable)


def _resolve_file(path: str, base: Optional[Path], what: str, out: Path) -> str:
    p = Path(_subst(path, out))
    if p.is_absolute():
        candidates = [p]
    else:
        candidates = [Path.cwd() / p] + ([base / p] if base is not None else [])
    for c in candidates:
        if c.is_file():
            return str(c.resolve())
    raise ConfigError(f"{what}: no such file {path!r}")


def _allocation(topo: Topology, backend: Backend, gpus_here: Optional[int]) -> tuple[int, _Placer]:
    """The allocation's node count and its GPU bookkeeping (the local backend: this machine, whose
    GPUs must cover the topology's)."""
    if backend != "local":
        per_node = topo.cluster.gpus_per_node
        # on Ray the cluster's own GPUs are checked when it connects; gpus_per_node is a limit if set
        limit = per_node if per_node or backend != "ray" else 1 << 20
        return topo.cluster.nodes, _Placer(topo.cluster.nodes, limit)
    have = local_gpu_count() if gpus_here is None else gpus_here
    want = topo.gpus_wanted()
    if want > have:
        raise ConfigError(
            f"the topology asks for {want} GPU(s) but this machine has {have} "
            f"(set gpus: 0 to run on CPU)"
        )
    if topo.trainer.nnodes > 1:
        raise ConfigError(
            f"trainer.nnodes {topo.trainer.nnodes}: the local backend runs on one machine "
            "(use --backend ray or slurm)"
        )
    return 1, _Placer(1, have)


def _bind_host(topo: Topology, backend: Backend) -> str:
    """Where servers listen: loopback here (and on a loopback test cluster), every interface on a
    SLURM cluster, the address of the node Ray placed it on."""
    if backend == "ray":
        return "@HOST@"
    loop = backend == "local" or (topo.cluster.loopback and backend == "slurm")
    return "127.0.0.1" if loop else "0.0.0.0"


class _Ports:
    """The servers' ports: a free loopback port each here; on a cluster the wanted port, or the next
    one not yet taken on that node (on Ray over the whole plan: a port there names one server)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.used: dict[int, set[int]] = {}

    def take(self, node: int, wanted: int) -> int:
        if self.backend == "local":
            return free_port()
        taken = self.used.setdefault(0 if self.backend == "ray" else node, set())
        port = wanted
        while port in taken:
            port += 1
        taken.add(port)
        return port


@dataclass
class _Resolution:
    """What resolving one topology for one backend shares from step to step."""

    topo: Topology
    out: Path
    backend: Backend
    resume: bool
    topology_dir: Optional[Path]
    nodes: int
    placer: _Placer
    ports: _Ports
    bind: str

    @property
    def local(self) -> bool:
        return self.backend == "local"

    def subst(self, value: str) -> str:
        return _subst(value, self.out)

    def flags(self, flags: dict[str, Any]) -> dict[str, Any]:
        """``flags`` with ``{out}`` and ``{python}`` filled in its strings."""
        return {k: self.subst(v) if isinstance(v, str) else v for k, v in flags.items()}


def build_plan(
    topo: Topology,
    out: Path,
    backend: Backend,
    *,
    topology_dir: Optional[Path] = None,
    resume: bool = False,
    gpus_here: Optional[int] = None,
) -> Plan:
    """Resolve ``topo`` for ``backend`` into components; every user mistake is a ``ConfigError``."""
    nodes, placer = _allocation(topo, backend, gpus_here)
    r = _Resolution(
        topo=topo,
        out=out.resolve(),
        backend=backend,
        resume=resume,
        topology_dir=topology_dir,
        nodes=nodes,
        placer=placer,
        ports=_Ports(backend),
        bind=_bind_host(topo, backend),
    )
    comps = _prepare_components(r)
    api = _api_component(r)
    comps.append(api)
    trainer_nodes, trainer_gpus = _trainer_placement(r)  # reserved before the inference servers
    servers, urls, refresh_urls = _inference_components(r)
    comps += servers
    api_url = api.url or ""
    for ei, e in enumerate(topo.envs):
        comps += _env_components(r, ei, e, urls, api_url)
    trainer, save_path = _trainer_component(r, api_url, refresh_urls, trainer_nodes, trainer_gpus)
    comps.append(trainer)
    return Plan(topo, r.out, backend, comps, api_url, save_path / "metrics.jsonl", nodes)


def _prepare_components(r: _Resolution) -> list[Component]:
    return [
        Component(
            name=f"prepare-{step.name}",
            role="prepare",
            argv=[r.subst(a) for a in step.argv],
            nodes=[0],
            creates=r.subst(step.creates) if step.creates else None,
        )
        for step in r.topo.prepare
    ]


def _api_component(r: _Resolution) -> Component:
    node = r.topo.api.node
    if node >= r.nodes:
        raise ConfigError(f"api.node {node} is outside the {r.nodes}-node allocation")
    port = r.ports.take(node, r.topo.api.port)
    url = f"http://{node_host(node)}:{port}"
    argv = [sys.executable, "-m", "atroposlib.cli.run_api", "--host", r.bind]
    argv += ["--port", str(port), "--data-dir", str(r.out / "api-data")]
    argv += ["--resume" if r.resume else "--fresh"]
    argv += flag_args(r.flags(r.topo.api.flags))
    return Component("api", "api", argv, [node], url=url, health=url + "/health")


def _trainer_placement(r: _Resolution) -> tuple[list[int], list[int]]:
    """The trainer's nodes (the last ones unless pinned) and its GPU indices on each."""
    tr = r.topo.trainer
    first = tr.node if tr.node is not None else max(0, r.nodes - tr.nnodes)
    nodes = list(range(first, first + tr.nnodes))
    if nodes[-1] >= r.nodes:
        raise ConfigError(
            f"trainer: nodes {nodes[0]}..{nodes[-1]} do not fit a {r.nodes}-node allocation"
        )
    gpus = [r.placer.take(k, tr.gpus_per_node, "trainer") for k in nodes][0]
    return nodes, gpus


def _inference_components(
    r: _Resolution,
) -> tuple[list[Component], dict[str, list[str]], list[str]]:
    """Every inference server; their base URLs by group; the URLs the trainer refreshes."""
    comps: list[Component] = []
    urls: dict[str, list[str]] = {}
    refresh_urls: list[str] = []
    for gi, g in enumerate(r.topo.inference):
        urls[g.name] = []
        for i in range(g.servers):
            if g.kind == "external":
                url = g.urls[i].rstrip("/")
                name = f"inference-{g.name}-{i}"
                comp = Component(name, "inference", [], [], url=url, external=True)
            else:
                comp = _inference_server(r, gi, g, i)
            comps.append(comp)
            urls[g.name].append(comp.url or "")
            if g.refresh:
                refresh_urls.append(comp.url or "")
    return comps, urls, refresh_urls


def _inference_server(r: _Resolution, gi: int, g: InferenceSpec, i: int) -> Component:
    who = f"inference[{gi}] {g.name}"
    node = g.node if g.node is not None else r.placer.first_fit(g.gpus, who)
    gpus = r.placer.take(node, g.gpus, who)
    port = r.ports.take(node, g.port + i)
    url = f"http://{node_host(node)}:{port}"
    argv, extra_env = _server_command(g, port, r.local, r.bind, r.out)
    if gpus or g.gpus:
        extra_env["CUDA_VISIBLE_DEVICES"] = ",".join(str(x) for x in gpus)
    return Component(
        f"inference-{g.name}-{i}",
        "inference",
        argv,
        [node],
        env=extra_env,
        url=url,
        health=url + "/health",
        gpus=gpus,
        restart=True,
        startup_timeout=g.startup_timeout,
    )


def _trainer_component(
    r: _Resolution, api_url: str, refresh_urls: list[str], nodes: list[int], gpus: list[int]
) -> tuple[Component, Path]:
    """The trainer (torchrun when it has more than one process) and its save path."""
    tr = r.topo.trainer
    flags = r.flags(tr.flags)
    save_path = Path(str(flags.pop("save_path", r.out / "trainer")))
    if not save_path.is_absolute():
        save_path = Path.cwd() / save_path
    argv: list[str] = []
    if tr.config:
        argv += ["--config", _resolve_file(tr.config, r.topology_dir, "trainer.config", r.out)]
    argv += ["--api-url", api_url, "--save-path", str(save_path)]
    if refresh_urls:
        argv += ["--inference-urls", *refresh_urls]
    if r.resume:
        argv.append("--resume")
    argv += flag_args(flags)
    env = {"CUDA_VISIBLE_DEVICES": ",".join(str(x) for x in gpus)} if tr.gpus_per_node else {}
    head = _trainer_head(r, nodes)
    return Component("trainer", "trainer", head + argv, nodes, env=env, gpus=gpus), save_path


def _trainer_head(r: _Resolution, nodes: list[int]) -> list[str]:
    """How the trainer's module starts: ``python -m``, or torchrun (standalone on one node; across
    nodes meeting at node 0's rendezvous, each node's traffic on its own address)."""
    tr, py = r.topo.trainer, sys.executable
    if tr.nnodes * tr.nproc_per_node == 1:
        return [py, "-m", tr.module]
    head = [py, "-m", "torch.distributed.run", "--nnodes", str(tr.nnodes)]
    head += ["--nproc-per-node", str(tr.nproc_per_node)]
    if tr.nnodes == 1:
        return [*head, "--standalone", "-m", tr.module]
    head += ["--rdzv-backend", "c10d", "--rdzv-id", r.topo.name]
    rdzv = r.ports.take(nodes[0], tr.rdzv_port) if r.backend == "ray" else tr.rdzv_port
    head += ["--rdzv-endpoint", f"{node_host(nodes[0])}:{rdzv}"]
    # each node's collectives and rendezvous on its own address, never its host name's
    own = ["--rdzv", f"{node_host(nodes[0])}:{rdzv}"]
    own += ["--addr", "@HOST@"] if r.backend == "ray" else []
    return [py, "-m", "atroposlib.launch.node_net", *own, "--", *head, "-m", tr.module]


def _server_command(
    g: InferenceSpec, port: int, local: bool, host: str, out: Path
) -> tuple[list[str], dict[str, str]]:
    """argv and extra environment of one inference server of group ``g``, listening on ``host``.
    vLLM runs with its own Python here (``find_vllm_python``); on a cluster with the launcher's."""
    model = _subst(g.model or "", out)
    extra = [_subst(a, out) for a in g.args]
    if g.kind == "engine":
        argv = [sys.executable, "-m", "atroposlib.cli.serve_model", "--model", model]
        argv += ["--host", host, "--port", str(port), "--served-model-name", g.served_name]
        if "--device" not in extra:
            argv += ["--device", "cuda" if g.gpus else "cpu"]
        return argv + extra, {}
    if g.kind == "vllm":
        from atroposlib.inference.vllm_launch import vllm_server

        server = vllm_server(
            model,
            port,
            served_name=g.served_name,
            host=host,
            cuda=g.gpus > 0,
            python=None if local else sys.executable,
            dev_mode=g.refresh,  # in-place weight reloads go through vLLM's dev-mode routes
            extra_args=(*extra, "--tensor-parallel-size", str(g.tensor_parallel)),
        )
        return server.argv, dict(server.env)
    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", model]
    argv += ["--host", host, "--port", str(port), "--served-model-name", g.served_name]
    argv += ["--tp-size", str(g.tensor_parallel)]
    return argv + extra, {}


_FILLED_ENV_FLAGS = ("env.rollout_server_url", "openai.base_url")


def _env_components(
    r: _Resolution, ei: int, e: EnvSpec, inf_urls: dict[str, list[str]], api_url: str
) -> list[Component]:
    """The workers of env group ``e``, each with the API's and its inference servers' URLs."""
    topo, out, topology_dir, nodes = r.topo, r.out, r.topology_dir, r.nodes
    where = f"envs[{ei}]"
    if e.node >= nodes:
        raise ConfigError(f"{where}.node {e.node} is outside the {nodes}-node allocation")
    file = _resolve_file(e.file, topology_dir, f"{where}.file", out)
    flags = _env_flat(e.flags)
    for key in _FILLED_ENV_FLAGS:
        if key in flags:
            raise ConfigError(f"{where}.flags.{key} is set by the launcher")
    groups = e.inference if e.inference is not None else [g.name for g in topo.inference]
    urls = [u + "/v1" for g in groups for u in inf_urls[g]]
    served = next(g.served_name for g in topo.inference if g.name == groups[0])
    flags.setdefault("openai.model_name", served)
    base: list[str] = [sys.executable, file, "serve"]
    if e.config:
        base += ["--config", _resolve_file(e.config, topology_dir, f"{where}.config", out)]
    base += ["--env.rollout_server_url", api_url, "--openai.base_url", ",".join(urls)]
    comps = []
    for replica in range(e.replicas):
        name = f"env-{e.name}-{replica}"
        own = dict(flags)
        own.setdefault("env.spool_dir", str(out / "spool" / name))
        if replica and isinstance(own.get("env.seed"), int):
            own["env.seed"] = own["env.seed"] + replica  # replicas draw different prompts
        argv = list(base)
        for key, value in own.items():
            argv += [f"--{key}", _subst(_env_value(value), out)]
        comps.append(Component(name, "env", argv, [e.node], restart=True))
    return comps


__all__ = ["START_ORDER", "Component", "Plan", "build_plan", "flag_args", "local_gpu_count"]
