"""Atropos import path: TRL's vLLM backend (code in ``atroposlib.inference_clients.backends.trl_vllm``)."""

from atroposlib.inference_clients.backends.trl_vllm import TrlVllmServer

__all__ = ["TrlVllmServer"]
