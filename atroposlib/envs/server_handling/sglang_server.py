"""Atropos import path for the SGLang backend (``from ...sglang_server import SGLangServer``)."""

from atroposlib.envs.server_handling.backends import SGLangServer

__all__ = ["SGLangServer"]
