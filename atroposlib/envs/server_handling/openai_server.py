"""Atropos import path: the OpenAI backend (code in ``atroposlib.inference_clients.backends.openai``)."""

from atroposlib.inference_clients.backends.openai import OpenAIServer
from atroposlib.inference_clients.config import APIServerConfig

__all__ = ["APIServerConfig", "OpenAIServer"]
