"""Atropos import path: ``ServerManager`` (code in ``atroposlib.inference_clients.server_manager``)."""

from atroposlib.inference_clients.config import APIServerConfig, ServerBaseline
from atroposlib.inference_clients.server_manager import ServerManager

__all__ = ["APIServerConfig", "ServerBaseline", "ServerManager"]
