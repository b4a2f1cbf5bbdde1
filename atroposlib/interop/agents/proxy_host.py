"""The managed-server proxy served inside an env's process, for its agent programs: uvicorn on a free
loopback port in a thread of its own (its own event loop and its own ``ServerManager`` over the env's
server configs), sharing the env's ``ManagedStats`` so that the env's counts (token drifts, history
edits, sessions) include the agents' sessions. Stopped with ``stop()`` (the env's cleanup)."""

from __future__ import annotations

import threading
from typing import Any, Optional

from atroposlib.inference_clients.managed_stats import ManagedStats
from atroposlib.inference_clients.proxy.app import create_app
from atroposlib.inference_clients.proxy.settings import ProxySettings
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.utils.net import free_port, wait_for_http


class ProxyHost:
    """A running in-process proxy (see the module docstring); ``url`` is its base URL."""

    def __init__(
        self,
        configs: list[Any],
        tokenizer: Any,
        model_name: str,
        stats: ManagedStats,
        settings: Optional[ProxySettings] = None,
        max_model_len: Optional[int] = None,
        on_token_drift: str = "keep",
    ) -> None:
        import uvicorn

        manager = ServerManager(list(configs), on_token_drift=on_token_drift)
        manager.managed_stats = stats
        self.app = create_app(manager, tokenizer, model_name, settings, max_model_len)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(
            uvicorn.Config(
                self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
            )
        )
        self._thread = threading.Thread(target=self._server.run, name="agent-proxy", daemon=True)

    @property
    def state(self) -> Any:
        return self.app.state.proxy

    def start(self, timeout: float = 30.0) -> ProxyHost:
        self._thread.start()
        wait_for_http(self.url + "/health", timeout=timeout)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(15)


__all__ = ["ProxyHost"]
