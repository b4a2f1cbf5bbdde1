"""The sandboxes ``--harbor.sandbox`` chooses from, by name (``host``, the default, and ``podman``)."""

from __future__ import annotations

from atroposlib.interop.harbor.harbor_runtime import HarborRuntimeSandbox
from atroposlib.interop.harbor.host_sandbox import HostSandbox
from atroposlib.interop.harbor.sandbox import Sandbox

SANDBOXES: dict[str, type[Sandbox]] = {
    HostSandbox.kind: HostSandbox,
    HarborRuntimeSandbox.kind: HarborRuntimeSandbox,
}
DEFAULT_SANDBOX = HostSandbox.kind

__all__ = ["DEFAULT_SANDBOX", "SANDBOXES"]
