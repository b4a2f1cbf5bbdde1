"""The Ray backend: every component of a plan as a supervised process inside a Ray actor.

The launcher is the Ray driver (connected by ``ray_connect.connect``). Placement groups are reserved
first (components with GPUs); then, role by role (API, inference servers, env workers, trainer), one
actor per component (``ray_placement.ray_units``) is created where Ray puts it, reports its node's
address and a free port there, and starts the component with the URLs of the components before it
filled in; the API and inference servers must answer ``/health`` before the next role starts. A
multi-node trainer is one ``torchrun`` per trainer node, all meeting at the rendezvous hosted on trainer
node 0's address. The actors restart crashed env workers and inference servers (``supervisor.py``); the
launcher polls them, mirrors the trainer's metrics, ends the run when the trainer finishes or something
fails, and stops in the order trainer, env workers, inference servers, API (each actor ends its
process group, then the actor is killed and the placement groups removed). Logs go to
``DIR/logs/NAME.log`` from wherever the actor runs: the run directory must be on a shared file system.

Failures are named by their cause: the launcher asks every actor for its status without blocking the
tick; one that does not answer for a moment (a network blip) is waited out up to
``supervision.unresponsive_s``; an actor that died, or a trainer rank that failed, is checked against
its node (every actor there gone or silent, or Ray's node table marking it dead), and a lost or frozen
node ends the run with one line naming it, its address, the components that ran there and the
``--resume`` command. Nothing is re-placed.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from atroposlib.launch.metrics import mirror_lines
from atroposlib.launch.plan import Plan
from atroposlib.launch.ray_placement import RayUnit, ray_units
from atroposlib.launch.run_loop import Awaited, RunFailed, StopRequested, SupervisedRun
from atroposlib.launch.spawn import package_root
from atroposlib.launch.state import write_state
from atroposlib.launch.supervisor import ProcessSupervisor
from atroposlib.utils.procs import stop_groups

_STOP_ROLES = ("trainer", "env", "inference", "api")
PLACEMENT_TIMEOUT_S = 120.0
CALL_TIMEOUT_S = 60.0
STATUS_WAIT_S = 2.0  # a status call not answered within this is "silent" for the tick
SILENCE_NOTED_S = 3.0  # a silence at least this long is reported once when it ends
NODE_VERDICT_S = 30.0  # how long a lone dead actor waits for Ray to say whether its node is dead


def _nominal(url: Optional[str]) -> Optional[str]:
    """``@NODEk@:PORT`` of a plan URL (the key the actor's real address replaces)."""
    if not url or "@NODE" not in url:
        return None
    return url.split("//", 1)[-1].split("/", 1)[0]


class _Actor:
    """The launcher's view of one unit: its actor handle and what it last reported."""

    def __init__(self, unit: RayUnit) -> None:
        self.unit = unit
        self.handle: Any = None
        self.ip: Optional[str] = None
        self.host: Optional[str] = None
        self.url: Optional[str] = None
        self.state = "pending"
        self.restarts = 0
        self.pid: Optional[int] = None
        self.exit_code: Optional[int] = None
        self.said = 0  # crash notes already printed
        self.node_id: Optional[str] = None  # the Ray node it was placed on
        self.pending: Any = None  # the status call in flight
        self.silent_since: Optional[float] = None  # when it stopped answering (None: it answers)
        self.stopped = False  # its process is stopped (SIGSTOP)
        self.lost = False  # its node is gone

    @property
    def where(self) -> str:
        return f"{self.host} ({self.ip})" if self.host else "(not placed)"


class RayRun(SupervisedRun):
    """Run ``plan`` on the Ray cluster ``ray`` is connected to; ``run()`` returns the exit status."""

    def __init__(
        self,
        plan: Plan,
        ray: Any,
        *,
        address: str,
        namespace: str,
        topology_path: str = "",
        say: Callable[[str], None] = print,
        poll_s: float = 0.25,
    ) -> None:
        self.plan, self.ray, self.address, self.namespace = plan, ray, address, namespace
        self.out = plan.out
        self.sup = plan.topology.supervision
        self.say, self.poll_s, self.topology_path = say, poll_s, topology_path
        self.units, self.groups = ray_units(plan)
        self.actors = [_Actor(u) for u in self.units]
        self.pgs: dict[str, Any] = {}
        self.subs: dict[str, str] = {}  # "@NODEk@:PORT" -> "IP:PORT" as actors report
        self.run_state, self.message = "starting", ""
        self.host = socket.gethostname()
        self.api_url = plan.api_url
        super().__init__()
        self._cls: Any = None
        self.prepare = [c for c in plan.components if c.role == "prepare"]
        self.prepare_state = {c.name: "pending" for c in self.prepare}
        self._nodes_seen: tuple[float, dict[str, bool]] = (0.0, {})

    # --- state file ------------------------------------------------------------------------
    def save_state(self) -> None:
        rows: list[dict[str, Any]] = [
            {
                "name": c.name,
                "role": "prepare",
                "where": self.host,
                "host": self.host,
                "state": self.prepare_state[c.name],
                "restarts": 0,
                "url": None,
                "log": str(self.out / c.log),
                "pid": None,
            }
            for c in self.prepare
        ]
        for a in self.actors:
            rows.append(
                {
                    "name": a.unit.name,
                    "role": a.unit.comp.role,
                    "where": f"{a.host} ({a.ip})" if a.host else "-",
                    "host": a.host,
                    "state": a.state,
                    "restarts": a.restarts,
                    "url": a.url,
                    "log": str(self.out / a.unit.log),
                    "pid": a.pid,
                    "exit_code": a.exit_code,
                    "node_id": a.node_id,
                }
            )
        for c in self.plan.components:
            if c.external:
                rows.append(
                    {"name": c.name, "role": c.role, "where": "external", "state": "external"}
                    | {"restarts": 0, "url": c.url, "log": None, "pid": None}
                )
        write_state(
            self.out,
            {
                "version": 1,
                "backend": "ray",
                "ray_address": self.address,
                "namespace": self.namespace,
                "topology": self.topology_path,
                "launcher_pid": os.getpid(),
                "launcher_host": self.host,
                "state": self.run_state,
                "message": self.message,
                "api_url": self._fill(self.api_url),
                "metrics": str(self.out / "metrics.jsonl"),
                "components": rows,
            },
        )

    # --- start -----------------------------------------------------------------------------
    def _get(self, ref: Any, a: _Actor, timeout: float = CALL_TIMEOUT_S) -> Any:
        """``ray.get`` of a call to ``a``'s actor; a dead actor (its node's loss named when that is
        the cause) or no answer within ``timeout`` is ``RunFailed``."""
        try:
            return self.ray.get(ref, timeout=timeout)
        except self.ray.exceptions.GetTimeoutError:
            raise RunFailed(
                f"{a.unit.name}{' on ' + a.where if a.host else ''}: its Ray actor did not answer "
                f"within {timeout:.0f}s"
            ) from None
        except self.ray.exceptions.RayError as e:
            raise RunFailed(self._dead_line([(a, e)])) from None

    # --- nodes -------------------------------------------------------------------------------
    def _backend_args(self) -> list[str]:
        return ["--backend", "ray", "--ray-address", self.address]

    def _nodes(self, max_age: float = 2.0) -> dict[str, bool]:
        """Ray's node table: node id -> alive (asked at most every ``max_age`` s)."""
        at, seen = self._nodes_seen
        if time.monotonic() - at < max_age:
            return seen
        try:
            seen = {str(n["NodeID"]): bool(n["Alive"]) for n in self.ray.nodes()}
        except Exception:  # the head itself is out of reach for now: no verdict
            seen = {}
        self._nodes_seen = (time.monotonic(), seen)
        return seen

    def _on_node(self, a: _Actor) -> list[_Actor]:
        return [x for x in self.actors if x.node_id and x.node_id == a.node_id]

    def _node_line(self, a: _Actor, how: str) -> str:
        """One line: the node, its address, what ran there, and how to continue."""
        there = self._on_node(a) or [a]
        for x in there:
            x.lost = True
            x.state = "lost"
        names = ", ".join(x.unit.name for x in there)
        pins = sorted({x.unit.pin for x in there if x.unit.pin})
        other = f"another node with {', '.join(pins)}" if pins else "another node"
        return (
            f"node {a.host} ({a.ip}) {how}: {names} ran there; nothing was re-placed; when it is "
            f"back (or {other} has joined), continue with: {self.resume_hint()}"
        )

    def _probe(
        self, actors: list[_Actor], timeout: float = STATUS_WAIT_S
    ) -> tuple[list[tuple[_Actor, Exception]], list[_Actor]]:
        """Ask ``actors`` at once: (the dead ones with their error, the ones that do not answer)."""
        refs = [(a, a.handle.status.remote()) for a in actors if a.handle is not None]
        if refs:
            self.ray.wait([r for _, r in refs], num_returns=len(refs), timeout=timeout)
        dead: list[tuple[_Actor, Exception]] = []
        silent: list[_Actor] = []
        for a, ref in refs:
            try:
                self.ray.get(ref, timeout=0.1)
            except self.ray.exceptions.ActorUnavailableError:
                silent.append(a)
            except self.ray.exceptions.RayActorError as e:
                dead.append((a, e))
            except self.ray.exceptions.RayError:  # no answer in time
                silent.append(a)
        return dead, silent

    def _root_cause(self, failed: list[_Actor]) -> Optional[str]:
        """When a component failed, the actors that died or do not answer (a lost node kills the
        trainer's other ranks too): the line about them, which is the cause, or None."""
        others = [a for a in self.actors if a.handle is not None and a not in failed]
        dead, silent = self._probe(others)
        if dead:
            return self._dead_line(dead)
        for a in silent:
            there = self._on_node(a)
            if all(x in silent or x in failed for x in there):
                if a.node_id is not None and not self._nodes(max_age=1.0).get(a.node_id, True):
                    return self._node_line(a, "was lost (Ray marks it dead)")
                # killed or frozen: Ray has not noticed yet, and waiting for it would hold the run
                return self._node_line(a, "stopped answering")
        return None

    def _dead_line(self, dead: list[tuple[_Actor, Exception]]) -> str:
        """The line for actors that died: their node's loss when all its actors are gone or Ray
        declares the node dead, else the actor's own death."""
        a, err = dead[0]
        if a.node_id is None:  # died before it reported where it runs
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            return f"{a.unit.name}: its Ray actor died ({first})"
        gone = {x.unit.name for x, _ in dead}
        others = [x for x in self._on_node(a) if x.unit.name not in gone and x.handle is not None]
        if others:
            more_dead, silent = self._probe(others)
            if len(more_dead) + len(silent) == len(others):
                return self._node_line(a, "was lost (none of its components' actors answer)")
        if not others and len(gone) > 1:
            return self._node_line(a, "was lost (every component's actor there died)")
        deadline = time.monotonic() + (0 if others else NODE_VERDICT_S)
        while True:  # a lone actor: Ray's node table decides, once it has noticed
            alive = self._nodes(max_age=1.0).get(a.node_id, True)
            if not alive:
                return self._node_line(a, "was lost (Ray marks it dead)")
            if time.monotonic() >= deadline:
                break
            time.sleep(1.0)
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        a.state = "failed"
        return (
            f"{a.unit.name} on {a.where}: its Ray actor died ({first}); the node is up; "
            f"continue with: {self.resume_hint()}"
        )

    def _fill(self, text: str) -> str:
        for key, value in self.subs.items():
            text = text.replace(key, value)
        return text

    def _prepare(self) -> None:
        import subprocess

        for c in self.prepare:
            if c.creates and Path(c.creates).exists():
                self.prepare_state[c.name] = "skipped"
                continue
            self.say(f"[launch] {c.name}: {' '.join(c.argv)}")
            env = dict(os.environ, **self.plan.topology.env)
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (package_root(), env.get("PYTHONPATH", "")) if p
            )
            with open(self.out / c.log, "ab") as fh:
                proc = subprocess.Popen(
                    c.argv, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
                )
            self.prepare_state[c.name] = "running"
            self.save_state()
            while proc.poll() is None:
                if self._stop.wait(0.1):
                    stop_groups([proc.pid], self.sup.stop_timeout_s)
                    proc.wait()
                    raise StopRequested()
            ok = proc.returncode == 0
            self.prepare_state[c.name] = "done" if ok else "failed"
            self.save_state()
            if not ok:
                raise RunFailed(
                    f"{c.name} exited with code {proc.returncode}; see {self.out / c.log}"
                )

    def _placement_groups(self) -> None:
        from ray.util.placement_group import placement_group

        for g in self.groups:
            pg = placement_group(g.bundles, strategy=g.strategy, name=f"{self.namespace}-{g.name}")
            self.pgs[g.name] = pg
        for g in self.groups:
            deadline = time.monotonic() + PLACEMENT_TIMEOUT_S
            ready = self.pgs[g.name].ready()
            while True:
                self._check_stop()
                done, _ = self.ray.wait([ready], timeout=0.5)
                if done:
                    break
                if time.monotonic() > deadline:
                    raise RunFailed(
                        f"Ray could not place {g.name} ({g.strategy}, bundles {g.bundles}) within "
                        f"{PLACEMENT_TIMEOUT_S:.0f}s: the cluster lacks free GPUs or nodes for it"
                    )
            self.say(f"[launch] placement group {g.name} ready ({len(g.bundles)} bundle(s))")

    def _options(self, u: RayUnit) -> dict[str, Any]:
        opts: dict[str, Any] = {
            "name": u.name,
            "num_cpus": 0,
            "num_gpus": u.gpus,
            "max_concurrency": 4,  # status() while stop() waits
            "max_restarts": 0,
        }
        if u.resources():
            opts["resources"] = u.resources()
        if u.group:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                placement_group=self.pgs[u.group], placement_group_bundle_index=u.bundle
            )
        return opts

    def _create(self, a: _Actor) -> None:
        u = a.unit
        if self._cls is None:
            self._cls = self.ray.remote(ProcessSupervisor)
        cls = self._cls
        sup = self.sup.model_dump()
        a.handle = cls.options(**self._options(u)).remote(
            u.name, u.comp.role, str(self.out / u.log), u.comp.restart, sup
        )
        where = self._get(a.handle.where.remote(), a, PLACEMENT_TIMEOUT_S)
        a.ip, a.host, a.node_id = where["ip"], where["host"], where.get("node_id")
        a.state = "placed"

    def _argv(self, a: _Actor, port: Optional[int]) -> list[str]:
        u = a.unit
        nominal = _nominal(u.comp.url)
        out: list[str] = []
        for i, arg in enumerate(u.argv):
            if (
                port is not None
                and nominal
                and i
                and u.argv[i - 1] == "--port"
                and arg == nominal.rsplit(":", 1)[1]
            ):
                arg = str(port)
            arg = self._fill(arg.replace("@HOST@", a.ip or ""))
            if "@NODE" in arg or "@HOST@" in arg:
                raise RunFailed(f"{u.name}: {arg!r} names a component that is not placed yet")
            out.append(arg)
        return out

    def _env(self, a: _Actor) -> dict[str, str]:
        env = dict(self.plan.topology.env)
        for key, value in a.unit.comp.env.items():
            if key == "CUDA_VISIBLE_DEVICES":
                continue  # Ray gives the actor its GPUs; the child inherits them
            env[key] = self._fill(value)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_root(), env.get("PYTHONPATH", "")) if p
        )
        return env

    def _launch(self, a: _Actor) -> None:
        u = a.unit
        port: Optional[int] = None
        nominal = _nominal(u.comp.url)
        if nominal:
            port = int(self._get(a.handle.reserve_port.remote(), a))
            self.subs[nominal] = f"{a.ip}:{port}"
            a.url = self._fill(u.comp.url or "")
        if u.comp.role == "trainer" and u.trainer_node == 0 and "--rdzv-endpoint" in u.argv:
            key = u.argv[u.argv.index("--rdzv-endpoint") + 1]
            rdzv = int(self._get(a.handle.reserve_port.remote(), a))
            self.subs[key] = f"{a.ip}:{rdzv}"
        a.pid = int(self._get(a.handle.start.remote(self._argv(a, port), self._env(a)), a))
        a.state = "starting" if u.comp.health else "running"

    def _wait_health(self, group: list[_Actor]) -> None:
        self._await_health([self._awaited(a) for a in group if a.unit.comp.health])

    def _awaited(self, a: _Actor) -> Awaited:
        def exit_code() -> Optional[int]:
            st = self._get(a.handle.status.remote(), a)
            if st["state"] not in ("failed", "restarting", "done"):
                return None
            a.state, a.exit_code = "failed", st["exit_code"]
            return int(st["exit_code"])

        def ready() -> None:
            a.state = "running"
            self.say(f"[launch] {a.unit.name} ready at {a.url} on {a.host}")

        health = self._fill(a.unit.comp.health or "")
        log = self.out / a.unit.log
        return Awaited(a.unit.name, health, a.unit.comp.startup_timeout, log, exit_code, ready)

    def _start(self) -> None:
        (self.out / "logs").mkdir(parents=True, exist_ok=True)
        self.save_state()
        self._prepare()
        self._placement_groups()
        for role in ("api", "inference", "env", "trainer"):
            group = [a for a in self.actors if a.unit.comp.role == role]
            for a in group:
                self._check_stop()
                self._create(a)
                self.save_state()
            for a in group:  # trainer node 0 first: it hosts the rendezvous
                self._check_stop()
                self._launch(a)
                self.save_state()
            if role in ("api", "inference"):
                self._wait_health(group)
            elif group:
                placed = ", ".join(f"{a.unit.name} on {a.host}" for a in group)
                self.say(f"[launch] started {placed}")

    # --- supervision -----------------------------------------------------------------------
    def _poll(self, live: list[_Actor]) -> dict[str, dict[str, Any]]:
        """The status of every live actor that answers within ``STATUS_WAIT_S``. One that does not,
        or is briefly unavailable (a network blip), is silent until it answers again (one line then,
        if the silence was long); a dead one ends the run (``_dead_line``)."""
        for a in live:
            if a.pending is None:
                a.pending = a.handle.status.remote()
        refs = [a.pending for a in live]
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=STATUS_WAIT_S)
        done = set(ready)
        now = time.monotonic()
        answers: dict[str, dict[str, Any]] = {}
        dead: list[tuple[_Actor, Exception]] = []
        for a in live:
            if a.pending not in done:
                a.silent_since = a.silent_since or now
                continue
            ref, a.pending = a.pending, None
            try:
                st = self.ray.get(ref, timeout=CALL_TIMEOUT_S)
            except self.ray.exceptions.ActorUnavailableError:
                a.silent_since = a.silent_since or now
                continue
            except self.ray.exceptions.RayActorError as e:
                dead.append((a, e))
                continue
            except self.ray.exceptions.RayError:  # a call lost on the way: ask again next tick
                a.silent_since = a.silent_since or now
                continue
            if a.silent_since is not None:
                quiet = now - a.silent_since
                if quiet >= SILENCE_NOTED_S:
                    self.say(
                        f"[launch] {a.unit.name} on {a.where} answers again after {quiet:.1f} s"
                    )
                a.silent_since = None
            answers[a.unit.name] = st
        if dead:
            raise RunFailed(self._dead_line(dead))
        self._check_silent(live, now)
        return answers

    def _check_silent(self, live: list[_Actor], now: float) -> None:
        """Silent actors: their node declared dead by Ray, or silent past ``unresponsive_s``, end
        the run; shorter silences are waited out."""
        silent = [a for a in live if a.silent_since is not None]
        if not silent or now - min(a.silent_since or now for a in silent) < STATUS_WAIT_S:
            return
        alive = self._nodes()
        for a in silent:
            if a.node_id and not alive.get(a.node_id, True):
                raise RunFailed(self._node_line(a, "was lost (Ray marks it dead)"))
        limit = self.sup.unresponsive_s
        over = [a for a in silent if now - (a.silent_since or now) > limit]
        if not over:
            return
        a = over[0]
        there = self._on_node(a)
        if len(there) > 1 and all(x.silent_since is not None for x in there):
            raise RunFailed(
                self._node_line(
                    a, f"stopped answering (no component's actor there for {limit:.0f} s)"
                )
            )
        raise RunFailed(
            f"{a.unit.name} on {a.where}: its Ray actor has not answered for {limit:.0f} s; "
            f"continue with: {self.resume_hint()}"
        )

    def _tick(self) -> Optional[int]:
        live = [a for a in self.actors if a.handle is not None]
        answers = self._poll(live)
        trainers_done = True
        failed: list[_Actor] = []
        for a in live:
            st = answers.get(a.unit.name)
            if st is None:  # silent this tick
                trainers_done = trainers_done and a.unit.comp.role != "trainer"
                continue
            a.restarts, a.pid, a.exit_code = st["restarts"], st["pid"], st["exit_code"]
            a.state, a.stopped = st["state"], bool(st.get("stopped"))
            if st["state"] == "failed":
                failed.append(a)
                continue
            for note in st["crash_notes"][a.said :]:  # each one, even when polled after the restart
                self.say(f"[launch] {note}")
            a.said = len(st["crash_notes"])
            if a.unit.comp.role == "trainer" and st["state"] != "done":
                trainers_done = False
        if failed:
            self.save_state()
            message = answers[failed[0].unit.name]["message"]
            raise RunFailed(self._root_cause(failed) or message)
        self.save_state()
        return 0 if trainers_done else None

    def _stalled(self, seconds: float) -> str:
        head = f"no trainer step for {seconds:.0f} s{self._last_step()}"
        silent = [a for a in self.actors if a.silent_since is not None]
        stopped = [a for a in self.actors if a.stopped]
        if silent:
            names = ", ".join(f"{a.unit.name} on {a.where}" for a in silent)
            return f"{head}: {names} {'does' if len(silent) == 1 else 'do'} not answer"
        if stopped:
            a = stopped[0]
            names = ", ".join(f"{x.unit.name} on {x.where}" for x in stopped)
            verb = "is" if len(stopped) == 1 else "are"
            return f"{head}: {names} {verb} stopped (SIGSTOP?); see {self.out / a.unit.log}"
        trainers = [a for a in self.actors if a.unit.comp.role == "trainer"]
        names = ", ".join(f"{a.unit.name} on {a.where}" for a in trainers)
        return (
            f"{head}: the trainer ({names}) is running but made no progress; "
            f"see {self.out / 'logs' / 'trainer.log'}"
        )

    def _stop_all(self) -> None:
        """Stop in order; actors on a lost node, or not answering, are only killed (they cannot
        take a stop call, and waiting for one would hold up the rest)."""
        grace = self.sup.stop_timeout_s
        for role in _STOP_ROLES:
            group = [a for a in self.actors if a.unit.comp.role == role and a.handle is not None]
            refs = {
                a.unit.name: a.handle.stop.remote(grace)
                for a in group
                if not a.lost and a.silent_since is None
            }
            if refs:
                self.ray.wait(list(refs.values()), num_returns=len(refs), timeout=grace + 30)
            for a in group:
                ref = refs.get(a.unit.name)
                if ref is None:
                    a.state = "lost" if a.lost else "unreachable"
                else:
                    try:
                        st = self.ray.get(ref, timeout=1)
                        a.state, a.exit_code = st["state"], st["exit_code"]
                    except self.ray.exceptions.RayError:
                        a.state = "gone"
                try:
                    self.ray.kill(a.handle)  # takes whatever is left of its processes with it
                except Exception:  # already gone with its node
                    pass
                a.handle = None
        for pg in self.pgs.values():
            try:
                from ray.util.placement_group import remove_placement_group

                remove_placement_group(pg)
            except Exception:  # already gone with the cluster
                pass
        self.save_state()

    # --- the whole run ---------------------------------------------------------------------
    def _mirror_metrics(self) -> list[str]:
        return mirror_lines(self.plan.metrics_source, self.out / "metrics.jsonl")

    def _close(self) -> None:
        self.ray.shutdown()


__all__ = ["RayRun"]
