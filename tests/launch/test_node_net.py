"""A trainer spanning nodes uses each node's own address (``atroposlib.launch.node_net``): on real hosts
(namespaces, ``tests/hosts.py``) the wrapper finds the address and interface each node reaches the
rendezvous host from and hands them to gloo/NCCL and torchrun; an address that cannot work is one line,
exit 2. The 2-node trainer on hosts whose names resolve to loopback runs in the multi-host Ray and
SLURM tiers (``test_ray_hosts.py``, ``test_slurm_hosts.py``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from atroposlib.launch.node_net import interface_of, main, with_local_addr


def test_the_address_toward_the_rendezvous_host_is_the_nodes_own(net_hosts):
    hosts = net_hosts(2)
    a, b = hosts.hosts
    show = "import os; print(os.environ['GLOO_SOCKET_IFNAME'], os.environ['NCCL_SOCKET_IFNAME'], os.environ['ATROPOS_NODE_ADDR'])"
    for h in (a, b):  # toward the head: the head itself included
        done = h.run(
            [sys.executable, "-m", "atroposlib.launch.node_net", "--rdzv", f"{a.name}:29500", "--"]
            + [sys.executable, "-c", show],
            capture_output=True,
            text=True,
        )
        assert done.stdout.split() == ["eth0", "eth0", h.addr], done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--rdzv", "10.0.0.1:29500", "--addr", "127.0.0.1"],
            "--addr is 127.0.0.1, a loopback address on",
        ),
        (["--rdzv", "127.0.0.1", "--addr", "10.231.254.254"], "no interface of"),
        (["--rdzv", "127.0.0.1", "--addr", "node-a"], "--addr 'node-a': not an IPv4 address"),
        (["--rdzv", "no-such-host.invalid:1"], "cannot resolve 'no-such-host.invalid' on"),
    ],
)
def test_an_address_that_cannot_work_is_one_line_and_exit_2(capsys, args, message):
    assert main([*args, "--", "true"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("atroposlib.launch.node_net: error: "), err
    assert message in err[0]


def test_one_machine_on_loopback_is_allowed():
    """Every node on this machine (the rendezvous on loopback too): loopback is the right address."""
    show = "import os; print(os.environ['GLOO_SOCKET_IFNAME'])"
    done = subprocess.run(
        [sys.executable, "-m", "atroposlib.launch.node_net", "--rdzv", "127.0.0.1:1", "--addr"]
        + ["127.0.0.1", "--", sys.executable, "-c", show],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stdout.strip() == "lo", done.stderr


def test_torchrun_gets_the_local_address_and_the_rendezvous_host_once():
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "x.py"]
    assert with_local_addr(torchrun, "10.0.0.2")[3:5] == ["--local-addr", "10.0.0.2"]
    assert with_local_addr(torchrun, "10.0.0.2", True)[3:7] == [
        "--local-addr",
        "10.0.0.2",
        "--rdzv-conf",
        "is_host=1,read_timeout=300",  # not torchrun's 60 s: node 0 may start minutes later
    ]
    given = [*torchrun[:3], "--local-addr", "10.0.0.9", "--rdzv-conf", "is_host=0", *torchrun[3:]]
    assert with_local_addr(given, "10.0.0.2", True) == given
    assert with_local_addr(["python", "train.py"], "10.0.0.2") == ["python", "train.py"]
    assert interface_of("127.0.0.1") == "lo"
