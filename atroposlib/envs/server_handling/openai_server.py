"""Atropos import path for the OpenAI backend (``from ...openai_server import OpenAIServer``)."""

from atroposlib.envs.server_handling.backends import OpenAIServer

__all__ = ["OpenAIServer"]
