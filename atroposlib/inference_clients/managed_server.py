"""Token-exact tracking of generations (Atropos's ``ManagedServer``).

Inside ``async with env.server.managed_server(tokenizer=tok) as managed:`` every ``completion`` /
``chat_completion`` is sent to the backend as token ids (token-in/token-out) and recorded as a
``SequenceNode`` per returned sequence: the exact ``tokens`` (prompt + completion), ``masked_tokens``
(-100 on prompt, user and tool tokens, the id on generated tokens) and ``logprobs`` (1.0 on masked
positions, the inference logprob on generated ones).

Multi-turn: when a new prompt (text, or rendered chat template) starts with a tracked node's
``full_text``, the node's tokens are reused verbatim and only the new suffix is tokenized, so there is
no re-tokenization drift; in the default mode the extended node replaces its parent.

Each node also records ``weights_versions``: the [first, last] weights version that generated its
completion tokens, as the server reported it (``weights_version``), across all its turns; None when
the server reported none.

Tool calls (as Atropos): with a ``tool_parser`` (``"hermes"``; the manager's ``tool_parser``
attribute), ``chat_completion(tools=[...], tool_choice=...)`` renders the tools into the chat
template, turns assistant messages that carry ``tool_calls`` back into the exact text the model
wrote, and parses the reply's ``<tool_call>`` blocks into ``message.tool_calls`` (plain dicts, as
Atropos gives them, that also read as attributes: ``tc["function"]["name"]`` or
``tc.function.name``), the content being the text before the first call and ``finish_reason``
``tool_calls``. The tracked tokens are the generated ones, untouched. Without a parser, ``tools``
is ignored (Atropos's rule), with a warning. ``preserve_think_blocks=True`` keeps the ``<think>``
blocks of replayed assistant messages in the prompt even where the chat template would drop them.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from typing import Any, Optional

from openai.types.chat.chat_completion import ChatCompletion
from openai.types.completion import Completion
from pydantic import BaseModel

from atroposlib.inference_clients.tool_call_translator import ToolCallTranslator
from atroposlib.inference_clients.weights_version import Span, merge, result_versions
from atroposlib.type_definitions import MASK_IGNORE
from atroposlib.utils.tokenize_for_trainer import render_chat

logger = logging.getLogger(__name__)

PROMPT_LOGPROB = 1.0
"""Logprob placed on masked (non-generated) positions, as Atropos does: an impossible value."""

_THINK_OPEN, _THINK_CLOSE = "\x00MANAGED_THINK\x00", "\x00MANAGED_ENDTHINK\x00"


class ToolCallDict(dict):  # type: ignore[type-arg]
    """A tool call as Atropos's managed server gives it (a dict: ``tc["function"]["name"]``), whose
    keys also read as attributes (``tc.function.name``, as on OpenAI's objects)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _tool_call_dict(call: Any) -> ToolCallDict:
    function = ToolCallDict(name=call.function.name, arguments=call.function.arguments)
    return ToolCallDict(id=call.id, type="function", function=function)


def _protect_think(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        content = m.get("content")
        if m.get("role") == "assistant" and isinstance(content, str) and "<think>" in content:
            content = content.replace("<think>", _THINK_OPEN).replace("</think>", _THINK_CLOSE)
            m = {**m, "content": content}
        out.append(m)
    return out


class SequenceNode(BaseModel):
    """One tracked sequence: aligned ``tokens``, ``masked_tokens`` and ``logprobs``."""

    full_text: str
    tokens: list[int]
    masked_tokens: list[int]
    logprobs: list[float]
    metadata: Optional[dict[str, Any]] = None
    weights_versions: Optional[list[int]] = None  # [first, last] version of its completion tokens


class ManagedServer:
    """Records token ids, masks and logprobs of every sequence generated through it."""

    def __init__(
        self,
        server: Any,
        tokenizer: Any,
        track_tree: bool = False,
        thinking: bool = False,
        tool_parser: Optional[str] = None,
        preserve_think_blocks: bool = False,
    ) -> None:
        if tokenizer is None:
            raise ValueError("managed_server needs a tokenizer (pass tokenizer=self.tokenizer)")
        self.server = server
        self.tokenizer = tokenizer
        self.track_tree = track_tree
        self.thinking = thinking
        self._tool_parser_name = tool_parser  # Atropos's attribute name (env files log it)
        self._translator: Optional[ToolCallTranslator] = None
        self.preserve_think_blocks = preserve_think_blocks
        self.current_nodes: list[SequenceNode] = []
        self.sequences: dict[str, SequenceNode] = {}

    def _get_translator(self) -> Optional[ToolCallTranslator]:
        """The session's translator (it remembers the raw text behind each call id it parsed)."""
        if self._translator is None and self._tool_parser_name:
            self._translator = ToolCallTranslator(self.tokenizer, self._tool_parser_name)
        return self._translator

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
        answer = await self.server.tokens_and_logprobs_completion(input_ids=ids, **kwargs)
        _, outs, out_lps, reasons = answer
        inherited: Optional[Span] = None
        if parent is not None and parent.weights_versions is not None:
            inherited = (parent.weights_versions[0], parent.weights_versions[1])
        nodes = []
        for out, out_lp, reason, span in zip(
            outs, out_lps, reasons, result_versions(answer), strict=True
        ):
            versions = merge(inherited, span)
            text = self._decode(out, skip_special_tokens=True)
            tail = self._decode(out, skip_special_tokens=False) if chat else text
            # what the model wrote, special tokens kept (a <tool_call> may be one), its end-of-turn
            # token not: the chat template adds that back when the reply is replayed
            body = out[:-1] if out and out[-1] == self.tokenizer.eos_token_id else out
            raw = self._decode(list(body), skip_special_tokens=False) if chat else text
            nodes.append(
                (
                    text,
                    raw,
                    reason,
                    SequenceNode(
                        full_text=prompt + tail,
                        tokens=ids + list(out),
                        masked_tokens=masks + list(out),
                        logprobs=lps + list(out_lp),
                        metadata={"finish_reason": reason, "prompt_length": len(ids)},
                        weights_versions=list(versions) if versions is not None else None,
                    ),
                )
            )
        if parent is not None and not self.track_tree and parent in self.current_nodes:
            self.current_nodes.remove(parent)
        for *_, node in nodes:
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
        return Completion.model_validate(
            {
                "id": f"cmpl-{uuid.uuid4().hex[:12]}",
                "object": "text_completion",
                "created": int(time.time()),
                "model": str(kwargs.get("model", "managed")),
                "prompt_token_ids": ids,
                "choices": [
                    {
                        "index": i,
                        "text": text,
                        "finish_reason": _finish(reason),
                        "logprobs": None,
                        "token_ids": node.tokens[len(ids) :],
                    }
                    for i, (text, _, reason, node) in enumerate(nodes)
                ],
            }
        )

    async def chat_completion(self, **kwargs: Any) -> ChatCompletion:
        messages = kwargs.get("messages")
        if not isinstance(messages, (list, tuple)):
            raise TypeError("managed chat_completion needs messages=[...]")
        tools = kwargs.pop("tools", None)
        tool_choice = kwargs.pop("tool_choice", None)
        translator = self._get_translator() if tools else None
        if tools and translator is None:
            logger.warning(
                "chat_completion got tools= but no tool_parser is set, so the tools are ignored "
                "(set server.tool_parser = 'hermes' before managed_server())"
            )
        template_kwargs: dict[str, Any] = (
            {"enable_thinking": True}
            if self.thinking and not kwargs.pop("skip_reasoning", False)
            else {}
        )
        kwargs.pop("skip_reasoning", None)
        if "chat_template_kwargs" in kwargs:
            template_kwargs.update(kwargs.pop("chat_template_kwargs") or {})
        msgs = [dict(m) for m in messages]
        if translator is not None:
            msgs = translator.convert_messages_for_template(msgs)
            template_kwargs["tools"] = tools
        if self.preserve_think_blocks:
            msgs = _protect_think(msgs)
        prompt = self.tokenizer.apply_chat_template(
            msgs, tokenize=False, add_generation_prompt=True, **template_kwargs
        )
        if self.preserve_think_blocks:
            prompt = prompt.replace(_THINK_OPEN, "<think>").replace(_THINK_CLOSE, "</think>")
        ids, nodes = await self._generate(prompt, chat=True, kwargs=kwargs)
        choices, parsed_calls = [], []
        for i, (text, raw, reason, node) in enumerate(nodes):
            content: Optional[str] = text
            calls = None
            if translator is not None and tool_choice != "none":
                choice = tool_choice if isinstance(tool_choice, str) else "auto"
                parsed_content, calls, parsed_reason = translator.parse_model_output(
                    raw, choice, tools
                )
                if calls:
                    content, reason = parsed_content, parsed_reason
            parsed_calls.append(calls)
            choices.append(
                {
                    "index": i,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": _finish(reason),
                    "logprobs": None,
                    "token_ids": node.tokens[len(ids) :],
                }
            )
        completion = ChatCompletion.model_validate(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": str(kwargs.get("model", "managed")),
                "prompt_token_ids": ids,
                "choices": choices,
            }
        )
        for choice_out, calls in zip(completion.choices, parsed_calls, strict=True):
            if calls:  # Atropos attaches plain dicts after construction (env files index them)
                as_dicts: list[Any] = [_tool_call_dict(c) for c in calls]
                choice_out.message.tool_calls = as_dicts
        return completion


def _finish(reason: str) -> str:
    return reason if reason in ("stop", "length", "content_filter", "tool_calls") else "stop"


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
