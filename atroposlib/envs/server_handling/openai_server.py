"""Atropos import path for the OpenAI backend (``from ...openai_server import OpenAIServer``)."""

from atroposlib.envs.server_handling.backends import OpenAIServer
from atroposlib.envs.server_handling.server_baseline import APIServerConfig

__all__ = ["APIServerConfig", "OpenAIServer"]
