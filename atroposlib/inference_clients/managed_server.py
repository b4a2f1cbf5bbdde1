"""Token-exact tracking of generations (Atropos's ``ManagedServer``).

Inside ``async with env.server.managed_server(tokenizer=tok) as managed:`` every ``completion`` /
``chat_completion`` is sent to the backend as token ids (token-in/token-out) and recorded as a
``SequenceNode`` per returned sequence: the exact ``tokens`` (prompt + completion), ``masked_tokens``
(-100 on prompt, user and tool tokens, the id on generated tokens) and ``logprobs`` (1.0 on masked
positions, the inference logprob on generated ones).

Multi-turn: when a new prompt (text, or rendered chat template) starts with a tracked node's
``full_text``, the node's tokens are reused verbatim and only the new suffix is tokenized, so there is
no re-tokenization drift; in the default mode the extended node replaces its parent.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from openai.types.chat.chat_completion import ChatCompletion
from openai.types.completion import Completion
from pydantic import BaseModel

from atroposlib.type_definitions import MASK_IGNORE
from atroposlib.utils.openai_shapes import AnswerKind, openai_choice, openai_response
from atroposlib.utils.tokenize_for_trainer import render_chat

PROMPT_LOGPROB = 1.0
"""Logprob placed on masked (non-generated) positions, as Atropos does: an impossible value."""


class SequenceNode(BaseModel):
    """One tracked sequence: aligned ``tokens``, ``masked_tokens`` and ``logprobs``."""

    full_text: str
    tokens: list[int]
    masked_tokens: list[int]
    logprobs: list[float]
    metadata: Optional[dict[str, Any]] = None


class ManagedServer:
    """Records token ids, masks and logprobs of every sequence generated through it."""

    def __init__(
        self, server: Any, tokenizer: Any, track_tree: bool = False, thinking: bool = False
    ) -> None:
        if tokenizer is None:
            raise ValueError("managed_server needs a tokenizer (pass tokenizer=self.tokenizer)")
        self.server = server
        self.tokenizer = tokenizer
        self.track_tree = track_tree
        self.thinking = thinking
        self.current_nodes: list[SequenceNode] = []
        self.sequences: dict[str, SequenceNode] = {}

    # --- state -----------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        if self.track_tree:
            return {"sequences": dict(self.sequences), "tree": dict(self.sequences)}
        return {"nodes": list(self.current_nodes)}

    def reset(self) -> None:
        self.current_nodes = []
        self.sequences = {}

    # --- helpers ---------------------------------------------------------------------------
    def _encode(self, text: str, add_special_tokens: bool) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens))

    def _decode(self, ids: list[int], skip_special_tokens: bool) -> str:
        return self.tokenizer.decode(
            ids, skip_special_tokens=skip_special_tokens, clean_up_tokenization_spaces=False
        )

    def _find_parent(self, prompt: str) -> Optional[SequenceNode]:
        pool = self.sequences.values() if self.track_tree else self.current_nodes
        best: Optional[SequenceNode] = None
        for node in pool:
            if prompt.startswith(node.full_text) and (
                best is None or len(node.full_text) > len(best.full_text)
            ):
                best = node
        return best

    def _prompt_tokens(
        self, prompt: str, chat: bool
    ) -> tuple[list[int], list[int], list[float], Optional[SequenceNode]]:
        parent = self._find_parent(prompt)
        if parent is not None:
            suffix = self._encode(prompt[len(parent.full_text) :], add_special_tokens=False)
            return (
                parent.tokens + suffix,
                parent.masked_tokens + [MASK_IGNORE] * len(suffix),
                parent.logprobs + [PROMPT_LOGPROB] * len(suffix),
                parent,
            )
        ids = self._encode(prompt, add_special_tokens=not chat)
        return ids, [MASK_IGNORE] * len(ids), [PROMPT_LOGPROB] * len(ids), None

    async def _generate(self, prompt: str, chat: bool, kwargs: dict[str, Any]):
        ids, masks, lps, parent = self._prompt_tokens(prompt, chat)
        kwargs = {
            k: v
            for k, v in kwargs.items()
            if k not in ("prompt", "messages", "logprobs", "top_logprobs", "skip_reasoning")
        }
        _, outs, out_lps, reasons = await self.server.tokens_and_logprobs_completion(
            input_ids=ids, **kwargs
        )
        nodes = []
        for out, out_lp, reason in zip(outs, out_lps, reasons, strict=True):
            text = self._decode(out, skip_special_tokens=True)
            tail = self._decode(out, skip_special_tokens=False) if chat else text
            nodes.append(
                (
                    text,
                    reason,
                    SequenceNode(
                        full_text=prompt + tail,
                        tokens=ids + list(out),
                        masked_tokens=masks + list(out),
                        logprobs=lps + list(out_lp),
                        metadata={"finish_reason": reason, "prompt_length": len(ids)},
                    ),
                )
            )
        if parent is not None and not self.track_tree and parent in self.current_nodes:
            self.current_nodes.remove(parent)
        for _, _, node in nodes:
            if self.track_tree:
                self.sequences[node.full_text] = node
            else:
                self.current_nodes.append(node)
        return ids, nodes

    # --- OpenAI-shaped API -----------------------------------------------------------------
    async def completion(self, **kwargs: Any) -> Completion:
        prompt = kwargs.get("prompt")
        if not isinstance(prompt, str):
            raise TypeError("managed completion needs prompt=<str>")
        ids, nodes = await self._generate(prompt, chat=False, kwargs=kwargs)
        return Completion.model_validate(_answer("text_completion", kwargs, ids, nodes))

    async def chat_completion(self, **kwargs: Any) -> ChatCompletion:
        messages = kwargs.get("messages")
        if not isinstance(messages, (list, tuple)):
            raise TypeError("managed chat_completion needs messages=[...]")
        template_kwargs: dict[str, Any] = (
            {"enable_thinking": True}
            if self.thinking and not kwargs.pop("skip_reasoning", False)
            else {}
        )
        kwargs.pop("skip_reasoning", None)
        if "chat_template_kwargs" in kwargs:
            template_kwargs.update(kwargs.pop("chat_template_kwargs") or {})
        prompt = self.tokenizer.apply_chat_template(
            [dict(m) for m in messages],
            tokenize=False,
            add_generation_prompt=True,
            **template_kwargs,
        )
        ids, nodes = await self._generate(prompt, chat=True, kwargs=kwargs)
        return ChatCompletion.model_validate(_answer("chat.completion", kwargs, ids, nodes))


def _finish(reason: str) -> str:
    return reason if reason in ("stop", "length", "content_filter", "tool_calls") else "stop"


def _answer(
    kind: AnswerKind,
    kwargs: dict[str, Any],
    ids: list[int],
    nodes: list[tuple[str, str, SequenceNode]],
) -> dict[str, Any]:
    """The OpenAI answer for the generated ``nodes``: each choice carries its ``token_ids`` and the
    answer the ``prompt_token_ids``."""
    choices = [
        openai_choice(kind, i, text, _finish(reason), token_ids=node.tokens[len(ids) :])
        for i, (text, reason, node) in enumerate(nodes)
    ]
    body = openai_response(kind, str(kwargs.get("model", "managed")), choices)
    body["prompt_token_ids"] = ids
    return body


class DummyManagedServer:
    """For text-only (``openai``) servers, enabled by ATROPOS_ALLOW_DUMMY_MANAGED_SERVER=1: tokens come
    from tokenizing the text locally and logprobs are placeholders (0.0), so never train off-policy on them."""

    def __init__(self, server: Any, tokenizer: Any) -> None:
        self.server = server
        self.tokenizer = tokenizer
        self.current_nodes: list[SequenceNode] = []

    def get_state(self) -> dict[str, Any]:
        return {"nodes": list(self.current_nodes)}

    def reset(self) -> None:
        self.current_nodes = []

    def _record(self, prompt: str, prompt_ids: list[int], texts: list[tuple[str, str]]) -> None:
        for text, reason in texts:
            out = list(self.tokenizer.encode(text, add_special_tokens=False))
            self.current_nodes.append(
                SequenceNode(
                    full_text=prompt + text,
                    tokens=prompt_ids + out,
                    masked_tokens=[MASK_IGNORE] * len(prompt_ids) + out,
                    logprobs=[PROMPT_LOGPROB] * len(prompt_ids) + [0.0] * len(out),
                    metadata={"finish_reason": reason, "placeholder_logprobs": True},
                )
            )

    async def completion(self, **kwargs: Any) -> Completion:
        resp = await self.server.completion(**kwargs)
        prompt = kwargs["prompt"]
        self._record(
            prompt,
            list(self.tokenizer.encode(prompt)),
            [(c.text, c.finish_reason) for c in resp.choices],
        )
        return resp

    async def chat_completion(self, **kwargs: Any) -> ChatCompletion:
        resp = await self.server.chat_completion(**kwargs)
        # Render to text, then encode: ``apply_chat_template(tokenize=True)`` returns a list of ids
        # in transformers 4 but a ``BatchEncoding`` in transformers 5; this path is the same in both.
        prompt = render_chat(self.tokenizer, kwargs["messages"], add_generation_prompt=True)
        prompt_ids = list(self.tokenizer.encode(prompt, add_special_tokens=False))
        self._record(
            prompt, prompt_ids, [(c.message.content or "", c.finish_reason) for c in resp.choices]
        )
        return resp


class ManagedServerAdapter:
    """Makes a managed server look like ``openai.AsyncOpenAI`` for libraries that take a client
    (``client.chat.completions.create(...)``, ``client.completions.create(...)``, ``client.base_url``),
    so their calls are recorded by the managed server too."""

    def __init__(self, managed_server: Any, base_url: str = "") -> None:
        self._managed = managed_server
        self.base_url = base_url
        self.chat = _Namespace(completions=_Creator(managed_server.chat_completion))
        self.completions = _Creator(managed_server.completion)

    async def post(self, path: str, body: Any = None, cast_to: Any = None, **_: Any) -> Any:
        raise NotImplementedError(
            f"ManagedServerAdapter supports chat.completions and completions only, not post({path!r})"
        )

    def copy(self, **_: Any) -> Any:
        raise NotImplementedError("ManagedServerAdapter cannot be copied; use the managed server")


class _Creator:
    def __init__(self, fn: Any) -> None:
        self._fn = fn

    async def create(self, **kwargs: Any) -> Any:
        return await self._fn(**kwargs)


class _Namespace:
    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


def dummy_allowed() -> bool:
    return os.environ.get("ATROPOS_ALLOW_DUMMY_MANAGED_SERVER", "").lower() in ("1", "true", "yes")


__all__ = [
    "DummyManagedServer",
    "ManagedServer",
    "ManagedServerAdapter",
    "PROMPT_LOGPROB",
    "SequenceNode",
    "dummy_allowed",
]
