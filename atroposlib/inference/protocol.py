"""OpenAI-compatible request bodies of the engine and the builders of OpenAI-shaped responses.

These are OpenAI's (and vLLM's) public shapes, which the ``openai`` client parses; they are the engine's
HTTP surface, not atroposlib's own wire schema. vLLM-flavour extras: ``return_token_ids`` adds
``prompt_token_ids`` and ``token_ids`` to every choice (chat responses also carry ``prompt_token_ids``
at the top level, as vLLM does); ``stop_reason`` names the stop string that ended a choice; every
choice carries ``weight_versions`` (the weights version that generated each stretch of its output
tokens, the shape of vLLM's ``/inference/v1/generate``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Optional, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from atroposlib.inference.generation import RowResult
from atroposlib.utils.openai_shapes import openai_choice, openai_response, token_usage

MAX_INT32 = 2**31 - 1
"""Bound of the counts a request may give (``n``, ``max_tokens``, ``top_k``): far above any server
limit, low enough that no arithmetic on them leaves a 64-bit integer."""
MAX_SEED = 2**63 - 1
"""Bound of ``seed`` either way: choice ``i`` seeds its generator with ``seed + i``, which torch takes
only within 64 bits."""
VERSION_PATTERN = r"^[0-9]{1,18}$"
"""A weights version label: a trainer step, digits only, below 10**18 (envs stamp it into a group's
``policy_version``, which the trajectory API stores as a 64-bit integer)."""


def _valid_unicode(value: str) -> str:
    """A string without a lone UTF-16 surrogate (``"\ud83d"``, which Python's ``json.dumps`` writes
    for a broken string): no tokenizer, path or JSON writer can take one."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("holds a lone UTF-16 surrogate; send valid Unicode") from None
    return value


Text = Annotated[str, AfterValidator(_valid_unicode)]
"""A request string: refused (400 naming the field) when it holds a lone surrogate."""
PromptType = Union[Text, list[Text], list[int], list[list[int]]]


class StreamOptions(BaseModel):
    """``stream_options`` of a streaming request (OpenAI's, plus vLLM's ``continuous_usage_stats``)."""

    model_config = ConfigDict(extra="allow")

    include_usage: Optional[bool] = Field(
        default=False, description="Send a last chunk with the usage of the whole request."
    )
    continuous_usage_stats: Optional[bool] = Field(
        default=False, description="With include_usage: the running usage on every chunk."
    )


class _Common(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    model: Optional[Text] = Field(
        default=None,
        description="The served model name or a loaded LoRA adapter's name; omitted means the served "
        "model; any other name is a 404 (as in vLLM).",
    )
    n: int = Field(default=1, ge=1, le=MAX_INT32, description="Completions to generate per prompt.")
    max_tokens: Optional[int] = Field(
        default=None, ge=1, le=MAX_INT32, description="Most tokens to generate."
    )
    temperature: float = Field(
        default=1.0, ge=0.0, le=100.0, description="0 means greedy decoding."
    )
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    top_k: int = Field(
        default=0,
        ge=-1,
        le=MAX_INT32,
        description="Keep the k most likely tokens; 0 or -1 disables.",
    )
    stop: Optional[Union[Text, list[Text]]] = Field(
        default=None, description="Stop strings (not included)."
    )
    seed: Optional[int] = Field(
        default=None,
        ge=-MAX_SEED - 1,
        le=MAX_SEED,
        description="Per-request seed; choice i uses seed + i.",
    )
    stream: bool = Field(
        default=False, description="Answer with server-sent events, one chunk per new piece."
    )
    stream_options: Optional[StreamOptions] = Field(
        default=None, description="Only with stream=true: usage reporting of the stream."
    )
    return_token_ids: bool = Field(
        default=False, description="vLLM extra: return prompt/completion ids."
    )
    return_tokens_as_token_ids: bool = Field(
        default=False,
        description="vLLM extra: render logprob tokens as 'token_id:<id>' instead of text.",
    )
    ignore_eos: bool = Field(default=False, description="vLLM extra: keep generating past EOS.")
    presence_penalty: float = Field(default=0.0, description="Only 0 is supported.")
    frequency_penalty: float = Field(default=0.0, description="Only 0 is supported.")

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, v: Any) -> Optional[list[str]]:
        if v is None:
            return None
        items = [v] if isinstance(v, str) else list(v)
        if any(not s for s in items):
            raise ValueError("stop strings must be non-empty")
        return items


class CompletionRequest(_Common):
    """Body of POST /v1/completions."""

    prompt: PromptType = Field(
        description="Text, list of texts, token ids, or list of token-id lists."
    )
    logprobs: Optional[int] = Field(
        default=None, ge=0, le=20, description="Top alternatives per token."
    )
    prompt_logprobs: Optional[int] = Field(
        default=None,
        ge=0,
        le=20,
        description="vLLM extra: logprob, rank and top-k of every prompt token.",
    )
    echo: bool = Field(
        default=False, description="Echoing the prompt is not supported (must be false)."
    )


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Text
    content: Optional[Union[Text, list[dict[str, Any]]]] = ""


class ChatCompletionRequest(_Common):
    """Body of POST /v1/chat/completions."""

    messages: list[ChatMessage] = Field(min_length=1, description="The conversation so far.")
    logprobs: bool = Field(
        default=False, description="Return the logprob of every completion token."
    )
    top_logprobs: Optional[int] = Field(
        default=None, ge=0, le=20, description="Alternatives per token."
    )
    max_completion_tokens: Optional[int] = Field(
        default=None, ge=1, le=MAX_INT32, description="Alias of max_tokens."
    )
    add_generation_prompt: bool = Field(
        default=True, description="Open an assistant turn (vLLM extra)."
    )


class LoadLoraRequest(BaseModel):
    """Body of POST /v1/load_lora_adapter (vLLM's name and fields)."""

    lora_name: Text = Field(
        min_length=1, description="Name requests use as `model` to select the adapter."
    )
    lora_path: Text = Field(
        min_length=1, description="peft adapter directory (adapter_config.json)."
    )
    load_inplace: bool = Field(
        default=False,
        description="Replace the weights of an adapter already loaded under this name without a "
        "moment in which the name is unknown (vLLM's field); without it a loaded name is a 400.",
    )
    weight_version: Optional[str] = Field(
        None,
        pattern=VERSION_PATTERN,
        description="Label the served weights with this version as the adapter is swapped in "
        "(ours; the trainer's step). vLLM takes it with /update_weight_version instead.",
    )


class UnloadLoraRequest(BaseModel):
    """Body of POST /v1/unload_lora_adapter."""

    lora_name: Text = Field(min_length=1, description="Name of a loaded adapter.")


class UpdateWeightsRequest(BaseModel):
    """Body of POST /update_weights_from_disk (SGLang's name)."""

    model_path: Text = Field(min_length=1, description="Checkpoint directory to load weights from.")
    weight_version: Optional[str] = Field(
        None,
        pattern=VERSION_PATTERN,
        description="Label of the new weights (SGLang's name; the trainer's step); default: the "
        "current version + 1.",
    )


class UpdateWeightVersionRequest(BaseModel):
    """Body of POST /update_weight_version (vLLM's dev-mode route): label the served weights."""

    new_version: str = Field(
        pattern=VERSION_PATTERN, description="The new label: a trainer step (digits only)."
    )


class WeightsLoadAnswer(BaseModel):
    """``/update_weights_from_disk``'s answer (SGLang's shape): a 200 with ``success`` true, or a
    400 with ``success`` false when the folder is bad (the old weights stay)."""

    success: bool
    message: str
    weights_version: int = Field(description="The version being served after the call.")


def completion_response(
    model: str,
    prompts: list[list[int]],
    n: int,
    results: list[RowResult],
    token_text: Callable[[int], str],
    want_logprobs: Optional[int],
    return_token_ids: bool,
) -> dict[str, Any]:
    """Build a ``text_completion`` response; ``results`` are prompt-major (prompt i, sample j at i*n+j)."""
    choices = []
    for idx, res in enumerate(results):
        prompt_ids = prompts[idx // n]
        choice = openai_choice(
            "text_completion", idx, res.text, res.finish_reason, stop_reason=res.stop_reason
        )
        if want_logprobs is not None:
            tokens = [token_text(t) for t in res.token_ids]
            offsets, pos = [], 0
            for t in tokens:
                offsets.append(pos)
                pos += len(t)
            choice["logprobs"] = {
                "tokens": tokens,
                "token_logprobs": list(res.logprobs),
                "top_logprobs": [
                    {token_text(tid): lp for tid, lp in alts} for alts in res.top_logprobs
                ]
                if want_logprobs > 0
                else None,
                "text_offset": offsets,
            }
        if return_token_ids:
            choice["prompt_token_ids"] = list(prompt_ids)
            choice["token_ids"] = list(res.token_ids)
        choice["weight_versions"] = res.weight_versions()
        if res.prompt_logprobs is not None:
            choice["prompt_logprobs"] = [
                None
                if entry is None
                else {
                    str(tid): {"logprob": lp, "rank": rank, "decoded_token": token_text(tid)}
                    for tid, lp, rank in entry
                }
                for entry in res.prompt_logprobs
            ]
        choices.append(choice)
    usage = token_usage(sum(len(p) for p in prompts), sum(len(r.token_ids) for r in results))
    return openai_response("text_completion", model, choices, usage)


def _lp_entry(text: str, lp: float) -> dict[str, Any]:
    return {"token": text, "logprob": lp, "bytes": list(text.encode("utf-8"))}


def chat_response(
    model: str,
    prompt_ids: list[int],
    results: list[RowResult],
    token_text: Callable[[int], str],
    logprobs: bool,
    top_logprobs: int,
    return_token_ids: bool,
) -> dict[str, Any]:
    """Build a ``chat.completion`` response for one conversation and its ``n`` choices."""
    choices = []
    for idx, res in enumerate(results):
        choice = openai_choice(
            "chat.completion", idx, res.text, res.finish_reason, stop_reason=res.stop_reason
        )
        if logprobs:
            content = []
            for pos, (tid, lp) in enumerate(zip(res.token_ids, res.logprobs, strict=True)):
                entry = _lp_entry(token_text(tid), lp)
                alts = res.top_logprobs[pos] if pos < len(res.top_logprobs) else []
                entry["top_logprobs"] = [
                    _lp_entry(token_text(a), alp) for a, alp in alts[:top_logprobs]
                ]
                content.append(entry)
            choice["logprobs"] = {"content": content}
        if return_token_ids:
            choice["prompt_token_ids"] = list(prompt_ids)
            choice["token_ids"] = list(res.token_ids)
        choice["weight_versions"] = res.weight_versions()
        choices.append(choice)
    usage = token_usage(len(prompt_ids), sum(len(r.token_ids) for r in results))
    body = openai_response("chat.completion", model, choices, usage)
    if return_token_ids:
        body["prompt_token_ids"] = list(prompt_ids)
    return body


__all__ = [
    "MAX_INT32",
    "MAX_SEED",
    "Text",
    "VERSION_PATTERN",
    "UpdateWeightVersionRequest",
    "ChatCompletionRequest",
    "ChatMessage",
    "CompletionRequest",
    "LoadLoraRequest",
    "StreamOptions",
    "UnloadLoraRequest",
    "UpdateWeightsRequest",
    "WeightsLoadAnswer",
    "chat_response",
    "completion_response",
]
