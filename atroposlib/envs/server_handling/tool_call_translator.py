"""Atropos import path: ``ToolCallTranslator`` (code in ``atroposlib.inference_clients.tool_call_translator``)."""

from atroposlib.inference_clients.tool_call_translator import VLLM_AVAILABLE, ToolCallTranslator

__all__ = ["VLLM_AVAILABLE", "ToolCallTranslator"]
