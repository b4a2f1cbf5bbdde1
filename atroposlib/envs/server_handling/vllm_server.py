"""Atropos import path for the vLLM backend (``from ...vllm_server import VLLMServer``)."""

from atroposlib.envs.server_handling.backends import VLLMServer

__all__ = ["VLLMServer"]
