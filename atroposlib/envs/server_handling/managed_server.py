"""Atropos import path: ``ManagedServer`` (code in ``atroposlib.inference_clients.managed_server``)."""

from atroposlib.inference_clients.managed_server import (
    ManagedServer,
    ManagedServerAdapter,
    SequenceNode,
)

__all__ = ["ManagedServer", "ManagedServerAdapter", "SequenceNode"]
