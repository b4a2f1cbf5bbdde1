"""Atropos import path: the managed-server proxy (code in ``atroposlib.inference_clients.managed_server_proxy``)."""

from atroposlib.inference_clients.managed_server_proxy import create_app

__all__ = ["create_app"]
