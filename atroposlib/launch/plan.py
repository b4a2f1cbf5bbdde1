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
    out = out.resolve()
    local = backend == "local"
    if local:
        nodes = 1
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
        placer = _Placer(1, have)
    else:
        nodes = topo.cluster.nodes
        per_node = topo.cluster.gpus_per_node
        # on Ray the cluster's own GPUs are checked when it connects; gpus_per_node is a limit if set
        placer = _Placer(nodes, per_node if per_node or backend != "ray" else 1 << 20)
    used_ports: dict[int, set[int]] = {k: set() for k in range(nodes)}
    # where servers listen: loopback here (and on a loopback test cluster), every interface on a
    # SLURM cluster, the address of the node Ray placed it on
    loop = local or (topo.cluster.loopback and backend == "slurm")
    bind = "@HOST@" if backend == "ray" else "127.0.0.1" if loop else "0.0.0.0"

    def port(node: int, wanted: int) -> int:
        if local:
            return free_port()
        key = 0 if backend == "ray" else node  # Ray: unique over the plan (it names one server)
        p = wanted
        while p in used_ports.setdefault(key, set()):
            p += 1
        used_ports[key].add(p)
        return p

    def sub(values: list[str]) -> list[str]:
        return [_subst(v, out) for v in values]

    py = sys.executable
    comps: list[Component] = []
    for step in topo.prepare:
        comps.append(
            Component(
                name=f"prepare-{step.name}",
                role="prepare",
                argv=sub(step.argv),
                nodes=[0],
                creates=_subst(step.creates, out) if step.creates else None,
            )
        )

    # --- API -------------------------------------------------------------------------------
    api_node = topo.api.node
    if api_node >= nodes:
        raise ConfigError(f"api.node {api_node} is outside the {nodes}-node allocation")
    api_port = port(api_node, topo.api.port)
    api_url = f"http://{node_host(api_node)}:{api_port}"
    api_argv = [py, "-m", "atroposlib.cli.run_api", "--host", bind]
    api_argv += ["--port", str(api_port), "--data-dir", str(out / "api-data")]
    api_argv += ["--resume" if resume else "--fresh"]
    api_argv += flag_args(
        {k: _subst(v, out) if isinstance(v, str) else v for k, v in topo.api.flags.items()}
    )
    comps.append(
        Component("api", "api", api_argv, [api_node], url=api_url, health=api_url + "/health")
    )

    # --- inference servers (the trainer's node(s) are reserved first on a cluster) ----------------
    tr = topo.trainer
    tr_first = tr.node if tr.node is not None else max(0, nodes - tr.nnodes)
    tr_nodes = list(range(tr_first, tr_first + tr.nnodes))
    if tr_nodes[-1] >= nodes:
        raise ConfigError(
            f"trainer: nodes {tr_nodes[0]}..{tr_nodes[-1]} do not fit a {nodes}-node allocation"
        )
    tr_gpus = [placer.take(k, tr.gpus_per_node, "trainer") for k in tr_nodes][0]
    inf_urls: dict[str, list[str]] = {}
    refresh_urls: list[str] = []
    for gi, g in enumerate(topo.inference):
        inf_urls[g.name] = []
        for i in range(g.servers):
            name = f"inference-{g.name}-{i}"
            if g.kind == "external":
                url = g.urls[i].rstrip("/")
                comps.append(Component(name, "inference", [], [], url=url, external=True))
            else:
                who = f"inference[{gi}] {g.name}"
                node = g.node if g.node is not None else placer.first_fit(g.gpus, who)
                gpus = placer.take(node, g.gpus, who)
                p = port(node, g.port + i)
                url = f"http://{node_host(node)}:{p}"
                argv, extra_env = _server_command(g, p, local, bind, out)
                if gpus or g.gpus:
                    extra_env["CUDA_VISIBLE_DEVICES"] = ",".join(str(x) for x in gpus)
                comps.append(
                    Component(
                        name,
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
                )
            inf_urls[g.name].append(url)
            if g.refresh:
                refresh_urls.append(url)

    # --- env workers ---------------------------------------------------------------------------
    for ei, e in enumerate(topo.envs):
        comps += _env_components(ei, e, topo, inf_urls, api_url, out, topology_dir, nodes)

    # --- trainer -----------------------------------------------------------------------------
    flags = {k: _subst(v, out) if isinstance(v, str) else v for k, v in tr.flags.items()}
    save_path = Path(str(flags.pop("save_path", out / "trainer")))
    if not save_path.is_absolute():
        save_path = Path.cwd() / save_path
    targv: list[str] = []
    if tr.config:
        targv += ["--config", _resolve_file(tr.config, topology_dir, "trainer.config", out)]
    targv += ["--api-url", api_url, "--save-path", str(save_path)]
    if refresh_urls:
        targv += ["--inference-urls", *refresh_urls]
    if resume:
        targv.append("--resume")
    targv += flag_args(flags)
    if tr.nnodes * tr.nproc_per_node > 1:
        head = [py, "-m", "torch.distributed.run", "--nnodes", str(tr.nnodes)]
        head += ["--nproc-per-node", str(tr.nproc_per_node)]
        if tr.nnodes == 1:
            head.append("--standalone")
        else:
            head += ["--rdzv-backend", "c10d", "--rdzv-id", topo.name]
            rdzv = port(tr_nodes[0], tr.rdzv_port) if backend == "ray" else tr.rdzv_port
            head += ["--rdzv-endpoint", f"{node_host(tr_nodes[0])}:{rdzv}"]
            # each node's collectives and rendezvous on its own address, never its host name's
            own = ["--rdzv", f"{node_host(tr_nodes[0])}:{rdzv}"]
            own += ["--addr", "@HOST@"] if backend == "ray" else []
            head = [py, "-m", "atroposlib.launch.node_net", *own, "--", *head]
        head += ["-m", tr.module]
    else:
        head = [py, "-m", tr.module]
    tenv = {"CUDA_VISIBLE_DEVICES": ",".join(str(x) for x in tr_gpus)} if tr.gpus_per_node else {}
    comps.append(Component("trainer", "trainer", head + targv, tr_nodes, env=tenv, gpus=tr_gpus))
    return Plan(topo, out, backend, comps, api_url, save_path / "metrics.jsonl", nodes)


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
    ei: int,
    e: EnvSpec,
    topo: Topology,
    inf_urls: dict[str, list[str]],
    api_url: str,
    out: Path,
    topology_dir: Optional[Path],
    nodes: int,
) -> list[Component]:
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
    for r in range(e.replicas):
        name = f"env-{e.name}-{r}"
        own = dict(flags)
        own.setdefault("env.spool_dir", str(out / "spool" / name))
        if r and isinstance(own.get("env.seed"), int):
            own["env.seed"] = own["env.seed"] + r  # replicas draw different prompts
        argv = list(base)
        for key, value in own.items():
            argv += [f"--{key}", _subst(_env_value(value), out)]
        comps.append(Component(name, "env", argv, [e.node], restart=True))
    return comps


__all__ = ["START_ORDER", "Component", "Plan", "build_plan", "flag_args", "local_gpu_count"]
