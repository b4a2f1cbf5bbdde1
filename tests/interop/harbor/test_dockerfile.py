"""What the host sandbox makes of a task's Dockerfile: the steps it replays, and the one-line refusal
of what it cannot honour (a Debian package this host lacks, pip installs, multi-stage builds, ...)."""

from __future__ import annotations

import pytest

from atroposlib.interop.harbor.dockerfile import Copy, Run, read_dockerfile
from atroposlib.interop.harbor.host_sandbox import HostSandbox
from atroposlib.interop.harbor.task import read_task


def _plan(tmp_path, text):
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return read_dockerfile(path)


def test_the_replayed_steps(tmp_path):
    plan = _plan(
        tmp_path,
        '# a comment\nFROM debian:bookworm-slim AS base\nARG DIR=data\nENV MODE=fast OTHER="a b"\n'
        'WORKDIR /app\nCOPY app/ /app/\nCOPY ["notes.txt", "${DIR}/"]\n'
        "RUN apt-get update && apt-get install -y --no-install-recommends bash coreutils \\\n"
        '    && rm -rf /var/lib/apt/lists/* && chmod +x /app/run.sh\nUSER nobody\nCMD ["bash"]\n',
    )
    assert plan.refusal is None and plan.base == "debian:bookworm-slim"
    assert plan.workdir == "/app" and plan.env == {"MODE": "fast", "OTHER": "a b"}
    assert plan.steps == [
        Copy(("app/",), "/app/"),
        Copy(("notes.txt",), "/app/data/"),
        Run("chmod +x /app/run.sh"),
    ]
    assert plan.packages == ["bash", "coreutils"]


@pytest.mark.parametrize(
    "text, refusal",
    [
        (
            "FROM a\nRUN pip install numpy\n",
            "its Dockerfile installs packages (pip), which the host sandbox cannot",
        ),
        ("FROM a AS b\nFROM c\n", "its Dockerfile is a multi-stage build (several FROM)"),
        (
            "FROM a\nCOPY --from=b /x /y\n",
            "its Dockerfile copies from another stage (COPY --from), a multi-stage build",
        ),
        (
            "FROM a\nADD https://example.com/x /x\n",
            "its Dockerfile fetches https://example.com/x (ADD of a URL), which needs the network",
        ),
        (
            "FROM a\nONBUILD RUN x\n",
            "its Dockerfile uses ONBUILD, which the host sandbox does not replay",
        ),
        ("WORKDIR /app\n", "its Dockerfile has no FROM"),
    ],
)
def test_what_cannot_be_replayed_is_a_one_line_refusal(tmp_path, text, refusal):
    assert _plan(tmp_path, text).refusal == refusal


def test_a_task_whose_image_needs_what_the_host_lacks_is_refused(task_copy):
    lacking = task_copy(
        "train/count-00",
        {
            "environment/Dockerfile": "FROM debian:bookworm-slim\nRUN apt-get install -y bash no-such-package-xyz\nWORKDIR /app\n"
        },
    )
    assert HostSandbox.refusal(read_task(lacking)) == (
        "its image installs the Debian package(s) no-such-package-xyz, which this host lacks "
        "(install them here, or use --harbor.sandbox podman)"
    )
    system = task_copy(
        "train/count-01", {"environment/Dockerfile": "FROM x\nCOPY a /usr/local/bin/a\n"}
    )
    assert HostSandbox.refusal(read_task(system)) == (
        "its Dockerfile copies into /usr/local/bin/a, inside the host's read-only system"
    )
    compose = task_copy("train/count-02", {"environment/docker-compose.yaml": "services: {}\n"})
    (compose / "environment" / "Dockerfile").unlink()
    assert "compose file (docker-compose.yaml)" in HostSandbox.refusal(read_task(compose))
