"""envkit.chat.transcript and envkit.servers: what a group keeps of a rollout, and the servers envs use."""

import asyncio

from envkit.chat import chat, transcript
from envkit.servers import DEFAULT_MODEL, extra_server, local_vllm_server

from atroposlib.envs.base import BaseEnvConfig


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
