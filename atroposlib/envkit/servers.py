"""The inference servers an env talks to: the policy's default local vLLM, and extra servers.

``config_init`` returns the env's config and the policy server(s). Most envs here want their config
class with a few settings, a wandb run named after the env, and the local vLLM; ``local_defaults``
writes that ``config_init`` from the settings alone::

    class MCQAEnv(BaseEnv):
        name = "mcqa"
        env_config_cls = MCQAConfig
        config_init = local_defaults(group_size=8, max_token_length=2048, batch_size=12)

which is the same as::

    @classmethod
    def config_init(cls) -> tuple[MCQAConfig, list[APIServerConfig]]:
        config = cls.env_config_cls(wandb_name=cls.name, group_size=8, max_token_length=2048, batch_size=12)
        return config, [local_vllm_server()]

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


def local_defaults(**settings: Any) -> classmethod:
    """An env's ``config_init``: its ``env_config_cls`` with ``settings`` and ``wandb_name`` = its
    ``name``, and the local vLLM policy server (``local_vllm_server()``)."""

    def config_init(cls: Any) -> tuple[Any, list[APIServerConfig]]:
        return cls.env_config_cls(wandb_name=cls.name, **settings), [local_vllm_server()]

    return classmethod(config_init)


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


__all__ = ["DEFAULT_MODEL", "POLICY_URL", "extra_server", "local_defaults", "local_vllm_server"]
