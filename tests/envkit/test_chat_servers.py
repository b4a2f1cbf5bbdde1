"""atroposlib.envkit.chat.transcript and envkit.servers: what a group keeps of a rollout, and the servers envs use."""

import asyncio

from atroposlib.envkit.chat import chat, transcript
from atroposlib.envkit.servers import DEFAULT_MODEL, extra_server, local_defaults, local_vllm_server
from atroposlib.envs.base import BaseEnv, BaseEnvConfig


def test_transcript_adds_the_answer_and_an_optional_grader_note():
    prompt = chat("sys", "question")
    assert transcript(prompt, "42") == prompt + [{"role": "assistant", "content": "42"}]
    assert transcript(prompt, "42", "correct")[-1] == {"role": "grader", "content": "correct"}
    assert len(prompt) == 2  # the prompt itself is left as it was


def test_local_vllm_server_is_the_default_model_on_port_9001():
    server = local_vllm_server()
    assert server.model_name == DEFAULT_MODEL == BaseEnvConfig().tokenizer_name
    assert (server.base_url, server.server_type) == ("http://localhost:9001/v1", "vllm")
    assert local_vllm_server("none", health_check=False).health_check is False


def test_extra_server_is_not_health_checked():
    judge = extra_server("http://127.0.0.1:1/v1", "judge", "openai", "k", unavailable_wait=5.0)
    try:
        assert judge.unavailable_wait == 5.0 and len(judge.servers) == 1
        config = judge.servers[0].config
        assert (config.model_name, config.server_type, config.health_check) == (
            "judge",
            "openai",
            False,
        )
    finally:
        asyncio.run(judge.close())


def test_local_defaults_is_a_config_init_of_the_env_config_class_named_after_the_env():
    class Config(BaseEnvConfig):
        pass

    class Env(BaseEnv):
        name = "tiny_env"
        env_config_cls = Config
        config_init = local_defaults(group_size=4, batch_size=8)

    class Variant(Env):
        name = "variant"

    config, servers = Env.config_init()
    assert type(config) is Config and (config.group_size, config.batch_size) == (4, 8)
    assert config.wandb_name == "tiny_env" and Variant.config_init()[0].wandb_name == "variant"
    assert [s.base_url for s in servers] == [local_vllm_server().base_url]
