"""Atropos import path for TRL's vLLM server backend (``server_type: trl``).

TRL's ``trl vllm-serve`` exposes vLLM's OpenAI-compatible routes, so it is spoken to like vLLM.
"""

from atroposlib.envs.server_handling.backends import VLLMServer


class TrlVllmServer(VLLMServer):
    """TRL's vLLM server (``server_type: trl``)."""


__all__ = ["TrlVllmServer"]
