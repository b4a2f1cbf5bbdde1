"""The inference servers an env talks to: the policy's default local vLLM, and extra servers.

``config_init`` returns the env's config and the policy server(s)::

    env_config = MCQAConfig(group_size=8, batch_size=12, wandb_name="mcqa")
    return env_config, [local_vllm_server()]

Every env here defaults to the model ``BaseEnvConfig`` names (``tokenizer_name``'s default) served by
vLLM on ``localhost:9001``; ``--openai.*`` flags or the YAML's ``openai`` block change it.

An env that asks a second model (a judge, a teacher) builds its own ``ServerManager`` from its
``--env.*`` fields with ``extra_server``.
"""

from __future__ import annotations

from typing import Any

from atroposlib.envs.base import APIServerConfig, BaseEnvConfig, ServerManager

DEFAULT_MODEL: str = BaseEnvConfig.model_fields["tokenizer_name"].default
POLICY_URL = "http://localhost:9001/v1"


def local_vllm_server(model_name: str = DEFAULT_MODEL, **settings: Any) -> APIServerConfig:
    """The policy server an env defaults to: ``model_name`` on the vLLM at ``POLICY_URL``."""
    return APIServerConfig(
        model_name=model_name, base_url=POLICY_URL, api_key="x", server_type="vllm", **settings
    )


def extra_server(
    base_url: str, model_name: str, server_type: str, api_key: str, **manager_settings: Any
) -> ServerManager:
    """A ``ServerManager`` for one more model besides the policy. It is not health-checked (a
    request that fails is the env's to handle); ``manager_settings`` go to ``ServerManager``."""
    config = APIServerConfig(
        base_url=base_url,
        model_name=model_name,
        server_type=server_type,
        api_key=api_key,
        health_check=False,
    )
    return ServerManager([config], **manager_settings)


__all__ = ["DEFAULT_MODEL", "POLICY_URL", "extra_server", "local_vllm_server"]
