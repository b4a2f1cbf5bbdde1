"""Token-exact tracking of generations (Atropos's ``ManagedServer``).

Inside ``async with env.server.managed_server(tokenizer=tok) as managed:`` every ``completion`` /
``chat_completion`` is sent to the backend as token ids (token-in/token-out) and recorded as a
``SequenceNode`` per returned sequence: the exact ``tokens`` (the prompt ids the server echoed +
the ids it generated), ``masked_tokens`` (-100 on prompt, user and tool tokens, the id on generated
tokens) and ``logprobs`` (1.0 on masked positions, the inference logprob on generated ones); its
``metadata`` holds the last turn's ``finish_reason`` and ``overlong`` (cut at ``max_tokens``).

Multi-turn chat, token-exact by construction: when the messages of a new ``chat_completion`` start
with a tracked episode's conversation (its prompt messages, then the assistant reply as returned:
its text, its raw text, or its ``tool_calls``), the next prompt is the episode's tokens followed by
the tokens of the new turn only (``turn_tokens.new_turn_text``: the template's end of the last
assistant turn, the new messages, the generation prompt), and the extended node replaces its
parent. The history is never re-rendered into the prompt. Where re-rendering the whole conversation
with the chat template and tokenizing it would give other ids than these, that is a *token drift*:
counted by kind in ``ManagedStats`` (``managed/token_drifts``), logged once per kind, and handled as
``on_token_drift`` says: ``keep`` (default: train the exact tokens the model saw), ``split`` (the
old behaviour: a drift of text starts a new node from the re-rendered conversation, so the earlier
turns' generated tokens are masked in it) or ``drop`` (raise ``TokenDrift``: the episode ends and is
counted). A replayed assistant message that differs from what the model wrote starts a new node,
counted as a history edit. Text completions (``completion(prompt=str)``) extend a node whose text
the new prompt starts with, reusing its tokens.

Tool calls (as Atropos): with a ``tool_parser`` (``"hermes"``; the manager's ``tool_parser``
attribute), ``chat_completion(tools=[...], tool_choice=...)`` renders the tools into the chat
template, turns assistant messages that carry ``tool_calls`` back into the exact text the model
wrote, and parses the reply's ``<tool_call>`` blocks into ``message.tool_calls`` (plain dicts, as
Atropos gives them, that also read as attributes: ``tc["function"]["name"]`` or
``tc.function.name``), the content being the text before the first call and ``finish_reason``
``tool_calls``. Blocks that are not calls come back in ``message.tool_call_errors`` (``index``,
``kind``, ``error``, ``raw``: the block as written), counted by kind and logged once per kind; the
content is then the whole reply when no block is a call. The tracked tokens are the generated ones,
untouched. Without a parser, ``tools`` is ignored (Atropos's rule), with a warning. A ``tools``
entry that is not an OpenAI function spec is a ``ValueError`` naming it.
``preserve_think_blocks=True`` keeps the ``<think>`` blocks of replayed assistant messages in the
re-rendered conversation (Qwen3-style templates drop them), so no drift is counted for them.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Optional

from openai.types.chat.chat_completion import ChatCompletion
from openai.types.completion import Completion
from pydantic import BaseModel, PrivateAttr

from atroposlib.errors import TokenDrift
from atroposlib.inference_clients.managed_stats import ManagedStats
from atroposlib.inference_clients.tool_call_translator import ToolCallTranslator
from atroposlib.inference_clients.turn_tokens import Render, drift_kind, new_turn_text
from atroposlib.type_definitions import MASK_IGNORE
from atroposlib.utils.tokenize_for_trainer import render_chat

logger = logging.getLogger(__name__)

PROMPT_LOGPROB = 1.0
"""Logprob placed on masked (non-generated) positions, as Atropos does: an impossible value."""

DriftMode = Literal["keep", "split", "drop"]
DRIFT_MODES: tuple[str, ...] = ("keep", "split", "drop")

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


def check_tools(tools: Any) -> None:
    """Raise ``ValueError`` naming the first ``tools`` entry that is not an OpenAI function spec
    (``{"type": "function", "function": {"name": str, "parameters": object?}}``)."""
    if not isinstance(tools, (list, tuple)):
        raise ValueError(f"tools must be a list of function specs, got {type(tools).__name__}")
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ValueError(
                f"tools[{i}] is not a function spec: expected "
                '{"type": "function", "function": {"name": ..., "parameters": {...}}}, '
                f"got {str(tool)[:120]}"
            )
        if "parameters" in fn and not isinstance(fn["parameters"], dict):
            raise ValueError(f"tools[{i}] ({fn['name']}): parameters must be a JSON-schema object")


class SequenceNode(BaseModel):
    """One tracked sequence: aligned ``tokens``, ``masked_tokens`` and ``logprobs``."""

    full_text: str
    tokens: list[int]
    masked_tokens: list[int]
    logprobs: list[float]
    metadata: Optional[dict[str, Any]] = None
    # a chat episode: its conversation (prompt messages, then the assistant turn), the forms the
    # assistant turn may come back in, and the text of the end-of-turn token the model wrote
    _conversation: Optional[list[dict[str, Any]]] = PrivateAttr(default=None)
    _replies: tuple[str, ...] = PrivateAttr(default=())
    _end_text: str = PrivateAttr(default="")

    @property
    def overlong(self) -> bool:
        """Whether the last turn was cut at ``max_tokens`` (``finish_reason`` ``length``)."""
        return bool((self.metadata or {}).get("overlong"))


@dataclass
class _Prompt:
    """The ids to send for one request (and the text they stand for), their masks and logprobs,
    and the node they extend."""

    text: str
    ids: list[int]
    masks: list[int]
    logprobs: list[float]
    parent: Optional[SequenceNode] = None

    @classmethod
    def fresh(cls, text: str, ids: list[int]) -> _Prompt:
        return cls(text, ids, [MASK_IGNORE] * len(ids), [PROMPT_LOGPROB] * len(ids))

    @classmethod
    def extending(cls, parent: SequenceNode, text: str, suffix: list[int]) -> _Prompt:
        return cls(
            text,
            parent.tokens + suffix,
            parent.masked_tokens + [MASK_IGNORE] * len(suffix),
            parent.logprobs + [PROMPT_LOGPROB] * len(suffix),
            parent,
        )


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
        on_token_drift: str = "keep",
        stats: Optional[ManagedStats] = None,
    ) -> None:
        if tokenizer is None:
            raise ValueError("managed_server needs a tokenizer (pass tokenizer=self.tokenizer)")
        if on_token_drift not in DRIFT_MODES:
            raise ValueError(
                f"on_token_drift must be one of {', '.join(DRIFT_MODES)}, got {on_token_drift!r}"
            )
        self.server = server
        self.tokenizer = tokenizer
        self.track_tree = track_tree
        self.thinking = thinking
        self._tool_parser_name = tool_parser  # Atropos's attribute name (env files log it)
        self._translator: Optional[ToolCallTranslator] = None
        self.preserve_think_blocks = preserve_think_blocks
        self.on_token_drift = on_token_drift
        self.stats = stats if stats is not None else ManagedStats()
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
    def _pool(self) -> list[SequenceNode]:
        return list(self.sequences.values()) if self.track_tree else list(self.current_nodes)

    def _encode(self, text: str, add_special_tokens: bool) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens))

    def _decode(self, ids: list[int], skip_special_tokens: bool) -> str:
        return self.tokenizer.decode(
            ids, skip_special_tokens=skip_special_tokens, clean_up_tokenization_spaces=False
        )

    def _text_parent(self, prompt: str) -> Optional[SequenceNode]:
        """The tracked node with the longest text that ``prompt`` starts with."""
        best: Optional[SequenceNode] = None
        for node in self._pool():
            if prompt.startswith(node.full_text) and (
                best is None or len(node.full_text) > len(best.full_text)
            ):
                best = node
        return best

    def _text_prompt(self, prompt: str, chat: bool) -> _Prompt:
        parent = self._text_parent(prompt)
        if parent is not None:
            suffix = self._encode(prompt[len(parent.full_text) :], add_special_tokens=False)
            return _Prompt.extending(parent, prompt, suffix)
        return _Prompt.fresh(prompt, self._encode(prompt, add_special_tokens=not chat))

    def _chat_parent(self, msgs: list[dict[str, Any]]) -> Optional[SequenceNode]:
        """The episode whose conversation ``msgs`` continues (the longest one); counts a history
        edit when an episode's prompt matches but the replayed assistant turn is not what the
        model wrote."""
        best: Optional[SequenceNode] = None
        edited = False
        for node in self._pool():
            conv = node._conversation
            if conv is None or len(conv) >= len(msgs) or msgs[: len(conv) - 1] != conv[:-1]:
                continue
            reply = msgs[len(conv) - 1]
            content = reply.get("content")
            if reply.get("role") != "assistant":
                continue
            if not isinstance(content, str) or content not in node._replies:
                edited = True
            elif best is None or len(conv) > len(best._conversation or ()):
                best = node
        if best is None and edited:
            self.stats.history_edit()
        return best

    def _chat_prompt(self, msgs: list[dict[str, Any]], rendered: str, render: Render) -> _Prompt:
        """What to send for the chat ``msgs``, whose full rendering is ``rendered`` (see the
        module docstring)."""
        parent = self._chat_parent(msgs)
        if parent is None or parent._conversation is None:
            return self._text_prompt(rendered, chat=True)
        history = parent._conversation
        suffix_text = new_turn_text(render, msgs[len(history) :], history, parent._end_text)
        rendered_ids = self._encode(rendered, add_special_tokens=False)
        if suffix_text is None:
            self._drift("unsplittable")
            return _Prompt.fresh(rendered, rendered_ids)
        suffix = self._encode(suffix_text, add_special_tokens=False)
        exact = _Prompt.extending(parent, parent.full_text + suffix_text, suffix)
        kind = drift_kind(exact.ids, rendered, rendered_ids, lambda ids: self._decode(ids, False))
        if kind is None:
            return exact
        self._drift(kind)
        if self.on_token_drift == "split" and kind != "retokenization":
            return _Prompt.fresh(rendered, rendered_ids)  # the old behaviour: a new node
        return exact

    def _drift(self, kind: str) -> None:
        self.stats.drift(kind, self.on_token_drift)
        if self.on_token_drift == "drop":
            self.stats.dropped()
            raise TokenDrift(
                f"token drift ({kind}): re-rendering the conversation would not give the tokens "
                "the model saw, and on_token_drift is 'drop'"
            )

    def _server_prompt(self, prompt: _Prompt, echoed: Sequence[int]) -> _Prompt:
        """The prompt as the server saw it: its echoed ids (a server may prepend, e.g. a BOS)."""
        echoed = [int(t) for t in echoed]
        if not echoed or echoed == prompt.ids:
            return prompt
        extra = len(echoed) - len(prompt.ids)
        if extra > 0 and echoed[extra:] == prompt.ids:
            pad = [MASK_IGNORE] * extra
            return _Prompt(
                prompt.text,
                echoed,
                pad + prompt.masks,
                [PROMPT_LOGPROB] * extra + prompt.logprobs,
                prompt.parent,
            )
        self._drift("server_prompt")
        return _Prompt.fresh(prompt.text, echoed)

    async def _generate(
        self,
        prompt: _Prompt,
        chat: bool,
        kwargs: dict[str, Any],
        conversation: Optional[list[dict[str, Any]]] = None,
    ) -> tuple[list[int], list[tuple[str, str, str, SequenceNode]]]:
        kwargs = {
            k: v
            for k, v in kwargs.items()
            if k not in ("prompt", "messages", "logprobs", "top_logprobs", "skip_reasoning")
        }
        echoed, outs, out_lps, reasons = await self.server.tokens_and_logprobs_completion(
            input_ids=prompt.ids, **kwargs
        )
        prompt = self._server_prompt(prompt, echoed)
        ids = prompt.ids
        specials = set(getattr(self.tokenizer, "all_special_ids", []) or [])
        nodes = []
        for out, out_lp, reason in zip(outs, out_lps, reasons, strict=True):
            out = [int(t) for t in out]
            text = self._decode(out, skip_special_tokens=True)
            tail = self._decode(out, skip_special_tokens=False) if chat else text
            # what the model wrote, special tokens kept (a <tool_call> may be one), its end-of-turn
            # token not: the chat template adds that back when the reply is replayed
            ended = bool(out) and reason != "length" and out[-1] in specials
            body = out[:-1] if ended or (out and out[-1] == self.tokenizer.eos_token_id) else out
            raw = self._decode(list(body), skip_special_tokens=False) if chat else text
            turns = 1 if prompt.parent is None else _turns(prompt.parent) + 1
            node = SequenceNode(
                full_text=prompt.text + tail,
                tokens=ids + out,
                masked_tokens=prompt.masks + out,
                logprobs=prompt.logprobs + [float(x) for x in out_lp],
                metadata={
                    "finish_reason": reason,
                    "overlong": reason == "length",
                    "prompt_length": len(ids),
                    "turns": turns,
                },
            )
            if conversation is not None:
                node._conversation = [*conversation, {"role": "assistant", "content": raw}]
                node._replies = tuple(dict.fromkeys((raw, text, raw.strip(), text.strip())))
                node._end_text = self._decode([out[-1]], False) if ended else ""
            nodes.append((text, raw, reason, node))
        parent = prompt.parent
        if parent is not None and not self.track_tree and parent in self.current_nodes:
            self.current_nodes.remove(parent)
        for *_, node in nodes:
            if self.track_tree:
                self.sequences[node.full_text] = node
            else:
                self.current_nodes.append(node)
        return ids, nodes

    def _render(self, template_kwargs: dict[str, Any]) -> Render:
        """``render(messages, add_generation_prompt)`` with this request's template settings."""

        def render(messages: list[dict[str, Any]], generation_prompt: bool) -> str:
            msgs = _protect_think(messages) if self.preserve_think_blocks else messages
            text = self.tokenizer.apply_chat_template(
                msgs, tokenize=False, add_generation_prompt=generation_prompt, **template_kwargs
            )
            if self.preserve_think_blocks:
                text = text.replace(_THINK_OPEN, "<think>").replace(_THINK_CLOSE, "</think>")
            return str(text)

        return render

    # --- OpenAI-shaped API -----------------------------------------------------------------
    async def completion(self, **kwargs: Any) -> Completion:
        prompt = kwargs.get("prompt")
        if not isinstance(prompt, str):
            raise TypeError("managed completion needs prompt=<str>")
        ids, nodes = await self._generate(self._text_prompt(prompt, chat=False), False, kwargs)
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
            check_tools(tools)
            msgs = translator.convert_messages_for_template(msgs)
            template_kwargs["tools"] = tools
        render = self._render(template_kwargs)
        try:
            rendered = render(msgs, True)
        except Exception as e:  # noqa: BLE001 - one line naming what could not be rendered
            what = "these messages and tools" if template_kwargs.get("tools") else "these messages"
            raise ValueError(
                f"the chat template could not render {what}: {type(e).__name__}: {e}"
            ) from e
        prompt = self._chat_prompt(msgs, rendered, render)
        ids, nodes = await self._generate(prompt, True, kwargs, msgs)
        choices, parsed_calls, parse_errors = [], [], []
        for i, (text, raw, reason, node) in enumerate(nodes):
            content: Optional[str] = text
            calls, errors = None, []
            if translator is not None and tool_choice != "none":
                choice = tool_choice if isinstance(tool_choice, str) else "auto"
                reply = translator.parse_reply(raw, choice, tools)
                errors = reply.errors
                for err in errors:
                    self.stats.tool_parse_error(err.kind, err.raw)
                if reply.calls:
                    calls = reply.calls
                    content, reason = reply.content, reply.finish_reason
                elif errors:
                    content = raw  # nothing parsed: the env sees every block as written
            parsed_calls.append(calls)
            parse_errors.append(errors)
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
        for choice_out, calls, errors in zip(
            completion.choices, parsed_calls, parse_errors, strict=True
        ):
            if calls:  # Atropos attaches plain dicts after construction (env files index them)
                as_dicts: list[Any] = [_tool_call_dict(c) for c in calls]
                choice_out.message.tool_calls = as_dicts
            if translator is not None:
                setattr(  # noqa: B010 - an extra field of OpenAI's message model
                    choice_out.message,
                    "tool_call_errors",
                    [
                        ToolCallDict(index=e.index, kind=e.kind, error=e.message, raw=e.raw)
                        for e in errors
                    ],
                )
        return completion


def _turns(node: SequenceNode) -> int:
    return int((node.metadata or {}).get("turns", 1))


def _finish(reason: str) -> str:
    return reason if reason in ("stop", "length", "content_filter", "tool_calls") else "stop"


class DummyManagedServer:
    """For text-only (``openai``) servers, enabled by ATROPOS_ALLOW_DUMMY_MANAGED_SERVER=1: tokens come
    from tokenizing the text locally and logprobs are placeholders (0.0), so never train off-policy on them."""

    def __init__(self, server: Any, tokenizer: Any, stats: Optional[ManagedStats] = None) -> None:
        self.server = server
        self.tokenizer = tokenizer
        self.current_nodes: list[SequenceNode] = []
        self.stats = stats if stats is not None else ManagedStats()
        self.stats.text_only(str(getattr(getattr(server, "config", None), "server_type", "openai")))

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
                    metadata={
                        "finish_reason": reason,
                        "overlong": reason == "length",
                        "placeholder_logprobs": True,
                    },
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
    "DRIFT_MODES",
    "DriftMode",
    "DummyManagedServer",
    "ManagedServer",
    "ManagedServerAdapter",
    "PROMPT_LOGPROB",
    "SequenceNode",
    "check_tools",
    "dummy_allowed",
]
