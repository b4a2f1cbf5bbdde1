"""The trainer's own collectives (outside DDP/FSDP) work on a process group that serves only CUDA
tensors, as NCCL does.

This machine has no GPU, so the guard has three parts:

1. ``cuda:gloo``, a group that dispatches like NCCL (a CPU tensor: "No backend type associated with
   device type cpu"), run by two processes: the old statistics all-reduce (a CPU float64 tensor) fails
   there, which is the bug the gloo tests could not see; a CPU trainer on such a group is refused at
   start-up with one line; and every helper, given the device ``collective_device`` chose from the
   group, sends its tensors there (so here it stops at "no CUDA", not at the dispatch error it meets
   when handed CPU).
2. Two gloo processes: the helpers' values (sums, max, min, the broadcast object, the barrier).
3. The source: every collective call in ``example_trainer`` is in one of those helpers, with its tensor
   made by ``_device_tensor`` (or ``device=info.device``), so the next collective someone adds fails here
   until it goes through the same device choice.
"""

from __future__ import annotations

import ast
import json
import socket
import subprocess
import sys
from pathlib import Path

from _trainer_helpers import REPO, child_env

WORKER = Path(__file__).with_name("_collectives_worker.py")
DISPATCH_ERROR = "No backend type associated with device type cpu"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_two_ranks(
    scenario: str, backend: str | None = None, extra_env: dict[str, str] | None = None
) -> list[dict]:
    port = _free_port()
    procs = []
    for rank in range(2):
        env = child_env()
        env.update(extra_env or {})
        env.update(
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE="2",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
        )
        env.pop("ATROPOS_DIST_BACKEND", None)
        if backend:
            env["ATROPOS_DIST_BACKEND"] = backend
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), scenario],
                env=env,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return sorted(results, key=lambda r: r["rank"])


def test_helpers_reach_a_group_that_serves_only_cuda_through_its_device():
    for r in _run_two_ranks("cuda-only", backend="cuda:gloo"):
        # the failure mode exists here: the old path's CPU tensor is refused by a CUDA-only group
        assert DISPATCH_ERROR in r["old_cpu_all_reduce"]
        # a CPU trainer on such a group stops at start-up, saying why, not after its first step
        assert "serves only cuda tensors" in r["init"] and "device is cpu" in r["init"]
        assert r["chosen_device"] == "cuda:0"
        # handed CPU, every helper meets the dispatch error: the emulation would catch a regression
        assert set(r["helpers_on_cpu"]) == {"all_reduce_sums", "broadcast_object", "barrier"}
        for name, error in r["helpers_on_cpu"].items():
            assert DISPATCH_ERROR in error, name
        # handed the group's device, none sends a CPU tensor: each goes to CUDA (absent here), and
        # fails exactly as this torch build fails any tensor put on CUDA without a GPU: "Torch not
        # compiled with CUDA enabled" on a CPU build, "Found no NVIDIA driver" on a CUDA build
        for name, error in r["helpers_on_group_device"].items():
            if r["cuda_available"]:
                assert error == "", name
            else:
                assert r["no_cuda_error"], "a tensor on CUDA was accepted without CUDA"
                assert DISPATCH_ERROR not in error and error == r["no_cuda_error"], (name, error)


def test_the_process_group_takes_the_configured_timeout():
    """``init_distributed``'s timeout reaches the process group: a rank left waiting in the batch
    broadcast fails after it, not after torch's default (30 minutes for gloo, 10 for NCCL)."""
    r0, r1 = _run_two_ranks("timeout", extra_env={"TIMEOUT_S": "3"})
    assert r1["error"], "rank 1 waited past the timeout without an error"
    assert 2.0 <= r1["waited_s"] < 8.0, r1


def test_the_default_timeout_covers_the_longest_planned_wait():
    from example_trainer.config import WAIT_MARGIN_S, TrainingConfig

    cfg = TrainingConfig(model_name="m")
    # rank 0 may start vLLM (up to inference_startup_timeout), then wait for a batch (up to
    # batch_wait_timeout) while the other ranks sit in the batch broadcast; NCCL's default is 600 s
    assert cfg.resolved_distributed_timeout() == 300 + 600 + WAIT_MARGIN_S
    assert cfg.resolved_distributed_timeout() > 600
    longer = TrainingConfig(model_name="m", inference_startup_timeout=900, batch_wait_timeout=1800)
    assert longer.resolved_distributed_timeout() == 900 + 1800 + WAIT_MARGIN_S
    assert (
        TrainingConfig(model_name="m", distributed_timeout=42).resolved_distributed_timeout() == 42
    )


def test_helpers_values_on_gloo():
    r0, r1 = _run_two_ranks("gloo")
    for r in (r0, r1):
        assert r["device"] == "cpu"
        assert r["sums"] == {"tokens": 3.0, "ratio_max": 1.0, "ratio_min": 0.5}
        assert r["object"] == {"batch": [1, 2, 3]}


# torch.distributed's collectives (and point-to-point calls), by the names example_trainer could use
COLLECTIVES = {
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "monitored_barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "gather_object",
    "irecv",
    "isend",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
    "send",
    "batch_isend_irecv",
}
# where each may be called: (file, function) -> the collectives it issues
ALLOWED = {
    ("distributed.py", "broadcast_object"): {"broadcast_object_list"},
    ("distributed.py", "all_reduce_sums"): {"all_reduce"},
    ("distributed.py", "barrier"): {"all_reduce"},
}


def _is_device_tensor(node: ast.AST, assigned: dict[str, ast.AST]) -> bool:
    if isinstance(node, ast.Name) and node.id in assigned:
        node = assigned[node.id]
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "_device_tensor"
    )


def _enclosing_functions(tree: ast.AST) -> dict[ast.AST, ast.FunctionDef]:
    """Each node -> the innermost function it is in."""
    owner: dict[ast.AST, ast.FunctionDef] = {}

    def visit(node: ast.AST, fn: ast.FunctionDef | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            if inner is not None:
                owner[child] = inner
            visit(child, inner)

    visit(tree, None)
    return owner


def test_every_collective_in_the_trainer_goes_through_the_device_choice():
    found: dict[tuple[str, str], set[str]] = {}
    files = sorted((REPO / "example_trainer").rglob("*.py"))
    assert any(p.name == "distributed.py" for p in files)
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        owner = _enclosing_functions(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "torch.distributed"
            ):
                imported = {a.name for a in node.names} & COLLECTIVES
                assert not imported, f"{path.name}: import {imported}; call them as dist.<name>"
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name = node.func.attr
            if name not in COLLECTIVES or not ast.unparse(node.func.value).endswith("dist"):
                continue
            fn = owner.get(node)
            where = (path.name, fn.name if fn is not None else "<module>")
            assert name in ALLOWED.get(where, set()), (
                f"{path.name}:{node.lineno} {where[1]} calls dist.{name}: route it through "
                "example_trainer/distributed.py, with its tensors on info.device"
            )
            found.setdefault(where, set()).add(name)
            if name == "broadcast_object_list":
                device = [k.value for k in node.keywords if k.arg == "device"]
                assert device and ast.unparse(device[0]) == "info.device", where
                continue
            assigned = {
                t.id: n.value
                for n in ast.walk(fn)
                if isinstance(n, ast.Assign)
                for t in n.targets
                if isinstance(t, ast.Name)
            }
            assert node.args and _is_device_tensor(node.args[0], assigned), (
                f"{path.name}:{node.lineno}: dist.{name}'s tensor must come from "
                "_device_tensor(..., info, ...)"
            )
    assert found == ALLOWED  # every helper still issues its collective (the scan sees them)
    src = (REPO / "example_trainer" / "distributed.py").read_text()
    body = src.split("def _device_tensor", 1)[1].split("\ndef ", 1)[0]
    assert "device=info.device" in body
