"""The ``trl`` backend: TRL's vLLM server (``trl vllm-serve``).

It exposes vLLM's OpenAI-compatible routes, so it is spoken to like ``vllm``. It has none of the
routes the trainer refreshes weights through (TRL pushes weights over its own communicator), so
``weight_routes`` is None.
"""

from __future__ import annotations

from atroposlib.inference_clients.backends.vllm import VLLMServer


class TrlVllmServer(VLLMServer):
    """TRL's vLLM server (``server_type: trl``)."""

    weight_routes = None


__all__ = ["TrlVllmServer"]
