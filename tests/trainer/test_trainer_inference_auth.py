"""The trainer reaches an inference server that asks for a key: ``inference_api_key`` (by default
``$ATROPOS_ENGINE_API_KEY``, the variable the engine reads too) goes with every weight route; without it
the engine's 401 ends the refresh with an error naming the server, never a silent skip."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from atroposlib.errors import AtroposError
from atroposlib.utils.net import free_port, wait_for_http
from example_trainer.config import TrainingConfig
from example_trainer.weight_refresh import ReloadRefresh

KEY = "s3cret-engine-key"


@pytest.fixture(scope="module")
def keyed_engine(tiny_model, tmp_path_factory):
    port = free_port()
    log = open(tmp_path_factory.mktemp("keyed") / "engine.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "atroposlib.cli.serve_model", "--model", str(tiny_model)]
        + ["--host", "127.0.0.1", "--port", str(port), "--torch-threads", "1"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "ATROPOS_ENGINE_API_KEY": KEY},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(url + "/health", timeout=120, proc=proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def _reload(tmp_path, url: str, **kw) -> ReloadRefresh:
    cfg = TrainingConfig(
        model_name="m",
        save_path=str(tmp_path / "out"),
        weight_refresh="reload",
        inference_urls=[url],
        inference_server="atropos",
        async_refresh=False,
        **kw,
    )
    return ReloadRefresh(cfg)


def test_the_key_goes_with_every_weight_route(keyed_engine, tmp_path, tiny_model):
    import httpx
    from transformers import AutoModelForCausalLM

    refresh = _reload(tmp_path, keyed_engine, inference_api_key=KEY)
    refresh.refresh(1, AutoModelForCausalLM.from_pretrained(tiny_model), None)
    refresh.close()
    models = httpx.get(
        keyed_engine + "/v1/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=30
    )
    assert models.status_code == 200
    assert "step_0000001" in str(refresh._written[-1])


def test_without_the_key_the_refresh_fails_naming_the_server(keyed_engine, tmp_path, tiny_model):
    from transformers import AutoModelForCausalLM

    refresh = _reload(tmp_path, keyed_engine)
    with pytest.raises(AtroposError, match="401|key|auth") as err:
        refresh.refresh(1, AutoModelForCausalLM.from_pretrained(tiny_model), None)
    refresh.close()
    assert keyed_engine in str(err.value)


def test_the_key_defaults_to_the_engines_variable(monkeypatch):
    monkeypatch.setenv("ATROPOS_ENGINE_API_KEY", KEY)
    assert TrainingConfig(model_name="m").inference_api_key == KEY
    monkeypatch.delenv("ATROPOS_ENGINE_API_KEY")
    assert TrainingConfig(model_name="m").inference_api_key is None
