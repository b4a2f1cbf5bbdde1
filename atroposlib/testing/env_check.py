"""``check_env``: run an environment end to end against the fake OpenAI server and validate its groups.

    from atroposlib.testing import check_env
    groups = check_env(MyEnv, responses=["<think>...</think> \\boxed{4}"], items=2)

``check_env`` builds the env from its ``config_init()`` with a local tiny tokenizer (unless one is
given), points it at a ``FakeOpenAIServer`` (vLLM flavour, real HTTP on loopback), runs ``setup()``
and ``items`` items end to end (``get_next_item`` -> ``collect_trajectories`` ->
``postprocess_histories``) and validates every produced group with the wire schema, raising
``AssertionError``/``SchemaError`` with the reason. It returns the validated groups.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Optional

from atroposlib.groups import check_group, normalize_group
from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.testing.fake_server import FakeOpenAIServer, Responder
from atroposlib.testing.tiny_tokenizer import tiny_tokenizer_dir
from atroposlib.type_definitions import ScoredData


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
            backlog = env.context.backlog
            item = backlog.pop() if backlog else await env.get_next_item()
            if item is None:
                raise AssertionError(f"get_next_item() returned None for item {i}")
            groups, more = await env.collect_trajectories(item)
            env.context.backlog.extend(more or [])
            if groups:
                groups = await env.postprocess_histories(groups)
            for raw in groups if isinstance(groups, list) else [groups]:
                if raw is None:
                    continue
                built = isinstance(raw, ScoredData)  # GroupBuilder.build() validated it
                group = dict(raw.as_group()) if built else normalize_group(raw)
                expected = (group.get("group_overrides") or {}).get(
                    "group_size", env.config.group_size
                )
                if len(group["tokens"]) != expected:
                    raise AssertionError(
                        f"item {i}: a group has {len(group['tokens'])} sequences, expected {expected}"
                    )
                if not built:
                    check_group(group)
                produced.append(group)
    finally:
        await env.server.close()
        if env.context.jsonl_writer is not None:
            env.context.jsonl_writer.close()
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


__all__ = ["acheck_env", "check_env"]
