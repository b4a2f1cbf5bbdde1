"""Atropos import path: the managed-server proxy client (code in ``atroposlib.inference_clients.proxy_client``)."""

from atroposlib.inference_clients.proxy_client import ProxyManagedServer, create_proxy_session

__all__ = ["ProxyManagedServer", "create_proxy_session"]
