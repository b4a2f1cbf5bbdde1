"""Testing helpers for environment authors: ``check_env``, the fake OpenAI server, a tiny tokenizer.

    from atroposlib.envs.testing import check_env
    groups = check_env(MyEnv, responses=["<think>...</think> \\boxed{4}"], items=2)

``check_env`` builds the env from its ``config_init()`` with a local tiny tokenizer (unless one is
given), points it at a ``FakeOpenAIServer`` (vLLM flavour, real HTTP on loopback), runs ``setup()``
and ``items`` items end to end (``get_next_item`` -> ``collect_trajectories`` ->
``postprocess_histories``) and validates every produced group with the wire schema, raising
``AssertionError``/``SchemaError`` with the reason. It returns the validated groups.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from atroposlib.envs.fake_server import FakeOpenAIServer, Responder
from atroposlib.envs.groups import check_group
from atroposlib.envs.sending import normalize_group
from atroposlib.envs.server_handling.answers import to_openai
from atroposlib.envs.server_handling.backends import APIServer
from atroposlib.envs.server_handling.server_baseline import APIServerConfig
from atroposlib.errors import SchemaError

_TOKENIZER_LOCK = threading.Lock()
_TOKENIZER_DIR: Optional[Path] = None


def build_tiny_tokenizer(out_dir: Path) -> Path:
    """Train and save a small byte-level BPE tokenizer with a ChatML template (offline, < 1 s)."""
    from atroposlib.inference.tiny_model import build_tokenizer, default_corpus

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    build_tokenizer(default_corpus(seed=0, n_lines=600), vocab_size=384).save_pretrained(
        str(out_dir)
    )
    return out_dir


def tiny_tokenizer_dir() -> Path:
    """A process-wide tiny tokenizer directory, built on first use."""
    global _TOKENIZER_DIR
    with _TOKENIZER_LOCK:
        if _TOKENIZER_DIR is None:
            _TOKENIZER_DIR = build_tiny_tokenizer(
                Path(tempfile.mkdtemp(prefix="atropos-tiny-tok-"))
            )
        return _TOKENIZER_DIR


class ScriptedServer(APIServer):
    """In-process stand-in used by ``--testing``: answers every request with a fixed text, no HTTP."""

    def __init__(self, text: str = "This is a scripted test response.") -> None:
        super().__init__(APIServerConfig(base_url="", model_name="scripted", health_check=False))
        self.text = text

    async def _request_chat(self, kwargs: dict[str, Any]):
        n = int(kwargs.get("n", 1) or 1)
        return _to_openai_chat(self.text, n, kwargs.get("model", "scripted"))

    async def _request_completion(self, kwargs: dict[str, Any]):
        from openai.types.completion import Completion

        n = int(kwargs.get("n", 1) or 1)
        return to_openai(
            Completion,
            {
                "id": "scripted",
                "object": "text_completion",
                "created": 0,
                "model": "scripted",
                "choices": [
                    {"index": i, "text": self.text, "finish_reason": "stop", "logprobs": None}
                    for i in range(n)
                ],
            },
        )


def _to_openai_chat(text: str, n: int, model: str):
    from openai.types.chat.chat_completion import ChatCompletion

    return to_openai(
        ChatCompletion,
        {
            "id": "scripted",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": i,
                    "finish_reason": "stop",
                    "logprobs": None,
                    "message": {"role": "assistant", "content": text},
                }
                for i in range(n)
            ],
        },
    )


async def acheck_env(
    env_cls: type,
    *,
    server: FakeOpenAIServer,
    items: int = 1,
    tokenizer: Any = None,
    env_overrides: Optional[dict[str, Any]] = None,
) -> list[dict[str, Any]]:
    """Async core of ``check_env`` (use it when already inside an event loop)."""
    env_default, server_default = env_cls.config_init()
    overrides = {
        "tokenizer_name": str(tokenizer or tiny_tokenizer_dir()),
        "use_wandb": False,
        "data_path_to_save_groups": None,
        "ensure_scores_are_not_same": False,
        **(env_overrides or {}),
    }
    env_config = env_default.model_copy(update=overrides)
    type(env_config).model_validate(env_config.model_dump())
    if isinstance(server_default, list) and server_default:
        template = server_default[0].model_dump()
    elif isinstance(server_default, APIServerConfig):
        template = server_default.model_dump()
    else:
        template = {}
    server_cfg = APIServerConfig(
        **{
            **template,
            "base_url": server.base_url,
            "server_type": "vllm",
            "api_key": "x",
            "timeout": 60,
        }
    )
    env = env_cls(config=env_config, server_configs=[server_cfg], slurm=False, testing=False)
    produced: list[dict[str, Any]] = []
    try:
        await env.setup()
        for i in range(items):
            item = env.backlog.pop() if env.backlog else await env.get_next_item()
            if item is None:
                raise AssertionError(f"get_next_item() returned None for item {i}")
            groups, backlog = await env.collect_trajectories(item)
            env.backlog.extend(backlog or [])
            if groups:
                groups = await env.postprocess_histories(groups)
            for raw in groups if isinstance(groups, list) else [groups]:
                if raw is None:
                    continue
                group = normalize_group(raw)
                expected = (group.get("group_overrides") or {}).get(
                    "group_size", env.config.group_size
                )
                if len(group["tokens"]) != expected:
                    raise AssertionError(
                        f"item {i}: a group has {len(group['tokens'])} sequences, expected {expected}"
                    )
                check_group(group)
                produced.append(group)
    finally:
        await env.server.close()
        if env.jsonl_writer is not None:
            env.jsonl_writer.close()
    if not produced:
        raise AssertionError(f"{env_cls.__name__} produced no group from {items} item(s)")
    return produced


def check_env(
    env_cls: type,
    *,
    server: Optional[FakeOpenAIServer] = None,
    items: int = 1,
    tokenizer: Any = None,
    responses: Optional[Sequence[str]] = None,
    responder: Optional[Responder] = None,
    env_overrides: Optional[dict[str, Any]] = None,
) -> list[dict[str, Any]]:
    """Run ``items`` items of ``env_cls`` end to end against a fake server; return the validated groups."""
    if server is not None:
        return asyncio.run(
            acheck_env(
                env_cls,
                server=server,
                items=items,
                tokenizer=tokenizer,
                env_overrides=env_overrides,
            )
        )
    tok = tokenizer or tiny_tokenizer_dir()
    with FakeOpenAIServer(tokenizer=tok, responses=responses, responder=responder) as fake:
        return asyncio.run(
            acheck_env(
                env_cls, server=fake, items=items, tokenizer=tok, env_overrides=env_overrides
            )
        )


__all__ = [
    "FakeOpenAIServer",
    "ScriptedServer",
    "SchemaError",
    "acheck_env",
    "build_tiny_tokenizer",
    "check_env",
    "tiny_tokenizer_dir",
]
