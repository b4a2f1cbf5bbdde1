"""``ServedModel``: what the engine's routes share (the engine, its served names, request rows).

One per app, built by ``create_app`` and reached by the routes through ``deps.get_served``. It turns
a validated request into the engine's ``RowParams`` (the context-length and ``n`` limits, the adapter
a request names) and renders sampled tokens as text or as ``token_id:N``. A tokenizer that cannot
take a prompt is a 400 naming it; a request whose rows failed inside the engine's batch (a server
fault, logged there) is a ``GenerationFailed``, answered 500 for that request alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Optional

from atroposlib.inference.config import EngineConfig
from atroposlib.inference.engine import InferenceEngine
from atroposlib.inference.http import BadRequest, GenerationFailed
from atroposlib.inference.sampling import RowParams


def token_id_text(tid: int) -> str:
    """vLLM's ``return_tokens_as_token_ids`` rendering of a token."""
    return f"token_id:{tid}"


class ServedModel:
    """The loaded engine plus the names it answers to, shared by every route of one app."""

    def __init__(self, config: EngineConfig, engine: InferenceEngine) -> None:
        self.config = config
        self.engine = engine
        self.name = config.served_model_name or engine.model_path.name
        self.tokenizer = engine.tokenizer
        self.vocab = int(engine.loaded.model.get_input_embeddings().weight.shape[0])
        self.base_names = {self.name, config.model_path}
        self._text_cache: dict[int, str] = {}

    def token_text(self, tid: int) -> str:
        """The decoded text of one token (cached)."""
        s = self._text_cache.get(tid)
        if s is None:
            s = self._text_cache[tid] = self.tokenizer.decode([tid], skip_special_tokens=False)
        return s

    def renderer(self, as_token_ids: bool) -> Callable[[int], str]:
        """How a response spells its tokens: ``token_id:N`` or the decoded text."""
        return token_id_text if as_token_ids else self.token_text

    def check_model(self, model: Optional[str]) -> None:
        """vLLM's rule: no name = the served model; a served name or a loaded adapter; else 404."""
        if not model or model in self.base_names or model in self.engine.adapters:
            return
        raise BadRequest(
            f"The model `{model}` does not exist. Valid aliases: {self.name}.", "model", status=404
        )

    def encode(self, text: str, param: str, add_special_tokens: bool = True) -> list[int]:
        """The token ids of ``text``; a text the tokenizer refuses is a 400 naming ``param``."""
        try:
            ids: list[int] = self.tokenizer(text, add_special_tokens=add_special_tokens)[
                "input_ids"
            ]
        except Exception as e:  # noqa: BLE001 - whatever the tokenizer raises, the text is at fault
            raise BadRequest(f"cannot tokenize it: {type(e).__name__}: {e}", param) from e
        return ids

    def rows_for(
        self, ids: list[int], req: Any, max_tokens: Optional[int], top: int
    ) -> list[RowParams]:
        """The ``req.n`` generation rows of one tokenized prompt (400 when it cannot fit)."""
        eng = self.engine
        if not ids:
            raise BadRequest("prompt is empty after tokenization", "prompt")
        if len(ids) >= eng.max_model_len:
            raise BadRequest(
                f"prompt is {len(ids)} tokens; this model's maximum context length is {eng.max_model_len}",
                "prompt",
            )
        budget = eng.max_model_len - len(ids)
        mt = min(max_tokens, budget) if max_tokens is not None else budget
        if req.n > self.config.max_n:
            raise BadRequest(f"n={req.n} exceeds the server's max_n={self.config.max_n}", "n")
        return [
            RowParams(
                prompt_ids=ids,
                max_tokens=mt,
                temperature=req.temperature,
                top_p=req.top_p,
                top_k=max(req.top_k, 0),
                stop=req.stop or [],
                seed=None if req.seed is None else req.seed + j,
                top_logprobs=top,
                ignore_eos=req.ignore_eos,
                prompt_logprobs=getattr(req, "prompt_logprobs", None),
                adapter=req.model if req.model in eng.adapters else None,
            )
            for j in range(req.n)
        ]

    async def run(self, rows: list[RowParams]) -> list:
        """Queue ``rows`` (503 when the queue is full) and wait for their results; rows that failed
        in the batch are a ``GenerationFailed`` (the engine logged the fault)."""
        future = self.engine.submit(rows)
        try:
            return await asyncio.wrap_future(future)
        except Exception as e:  # noqa: BLE001 - the worker's fault, reported to this request only
            raise GenerationFailed(f"generation failed: {type(e).__name__}: {e}") from e


__all__ = ["ServedModel", "token_id_text"]
