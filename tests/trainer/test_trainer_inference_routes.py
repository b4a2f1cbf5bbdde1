"""The trainer's reload and LoRA strategies find a server's routes through the inference-client
registry: against a stand-in that speaks SGLang's protocol (tests/inference_clients/sglang_like.py)."""

from __future__ import annotations

import pytest

from example_trainer.config import TrainingConfig
from example_trainer.weight_refresh import LoraRefresh, ReloadRefresh
from tests.inference_clients.sglang_like import sglang_like_server


@pytest.fixture
def sglang_like():
    with sglang_like_server() as (url, calls):
        yield url, calls


def _cfg(tmp_path, url: str, mode: str) -> TrainingConfig:
    return TrainingConfig(
        model_name="m",
        save_path=str(tmp_path / "out"),
        weight_refresh=mode,
        inference_urls=[url],
        async_refresh=False,
        lora_rank=2,
        lora_alpha=4,
    )


def test_reload_and_lora_use_sglangs_routes(sglang_like, tmp_path, tiny_model):
    from transformers import AutoModelForCausalLM

    url, calls = sglang_like
    reload = ReloadRefresh(_cfg(tmp_path, url, "reload"))
    reload.refresh(1, AutoModelForCausalLM.from_pretrained(tiny_model), None)
    reload.close()
    assert reload._kinds == {url: "sglang"}
    assert calls[0][0] == "update_weights_from_disk"
    assert calls[0][1]["model_path"].endswith("step_0000001")
    assert calls[0][1]["weight_version"] == "1"  # the server labels its weights with the step

    calls.clear()
    lora = LoraRefresh(_cfg(tmp_path, url, "lora"))
    model = lora.prepare_model(AutoModelForCausalLM.from_pretrained(tiny_model))
    lora.start(str(tiny_model))
    lora.refresh(2, model, None)
    lora.refresh(3, model, None)
    lora.close()
    labels = [c[1]["new_version"] for c in calls if c[0] == "update_weight_version"]
    assert labels == ["0", "2", "3"]  # each adapter labelled with its step once it is loaded
    calls = [c for c in calls if c[0] != "update_weight_version"]
    assert [c[0] for c in calls] == [
        "load_lora_adapter",  # published before the first rollout
        "unload_lora_adapter",  # SGLang cannot load in place
        "load_lora_adapter",
        "unload_lora_adapter",
        "load_lora_adapter",
    ]
    assert all(c[1]["lora_name"] == "policy" for c in calls)
    assert calls[-1][1]["lora_path"].endswith("step_0000003")


def test_inference_server_takes_the_refreshable_server_types(tmp_path):
    from atroposlib.errors import ConfigError
    from example_trainer.config import config_from_sources

    for name in ("auto", "atropos", "vllm", "sglang"):
        assert TrainingConfig(model_name="m", inference_server=name).inference_server == name
    with pytest.raises(ConfigError, match="inference_server"):
        config_from_sources(TrainingConfig, None, {"model_name": "m", "inference_server": "openai"})
