"""Atropos import path of ``ServerHarness``, the scripted test double (code in
``atroposlib.testing.server_harness``)."""

from atroposlib.testing.server_harness import (
    ServerHarness,
    create_chat_completion,
    create_completion,
)

__all__ = ["ServerHarness", "create_chat_completion", "create_completion"]
