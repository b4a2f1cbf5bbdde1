"""Weight-refresh strategies: LoRA wraps and saves only the adapter, and a server without the needed
endpoint gives a clear error instead of a silent no-op."""

from __future__ import annotations

import pytest

from atroposlib.errors import ConfigError, InferenceError
from example_trainer.config import TrainingConfig
from example_trainer.refresh_modes import make_weight_refresh
from example_trainer.weight_refresh import LoraRefresh, ReloadRefresh, RestartRefresh


def _cfg(tmp_path, **kw) -> TrainingConfig:
    return TrainingConfig(model_name="m", save_path=str(tmp_path / "out"), **kw)


def test_factory_picks_the_mode(tmp_path):
    assert make_weight_refresh(_cfg(tmp_path, weight_refresh="none")).mode == "none"
    assert isinstance(make_weight_refresh(_cfg(tmp_path, weight_refresh="reload")), ReloadRefresh)


def test_restart_command_needs_its_placeholders(tmp_path):
    with pytest.raises(ConfigError, match="{port}"):
        RestartRefresh(
            _cfg(tmp_path, weight_refresh="restart", inference_command="serve --model {model_path}")
        )


def test_restart_command_that_cannot_start_is_an_inference_error(tmp_path):
    refresh = RestartRefresh(
        _cfg(
            tmp_path,
            weight_refresh="restart",
            inference_command="no-such-program-here --model {model_path} --port {port}",
        )
    )
    with pytest.raises(
        InferenceError, match="cannot start the inference server.*no-such-program-here"
    ):
        refresh.start(str(tmp_path))
    assert refresh.proc is None and refresh.log_path.is_file()


def test_a_resumed_trainer_keeps_the_weights_it_just_wrote(tmp_path, tiny_model):
    """A run resumed from scratch writes step 1 again while an earlier life's step 9 and 10 are still
    on disk: the folder just written (and the one before it) stay, the earlier life's go (before, the
    two highest-numbered stayed and step 1 was deleted as soon as it was written)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    tok = AutoTokenizer.from_pretrained(tiny_model)
    refresh = make_weight_refresh(_cfg(tmp_path, weight_refresh="none"))
    for step in (9, 10):  # an earlier life of the run
        refresh._save(step, model, tok)
    resumed = make_weight_refresh(_cfg(tmp_path, weight_refresh="none"))
    first = resumed._save(1, model, tok)
    assert first.is_dir() and (first / "config.json").is_file()
    assert sorted(p.name for p in resumed.weights_root.iterdir()) == ["step_0000001"]
    resumed._save(2, model, tok)
    resumed._save(3, model, tok)
    assert sorted(p.name for p in resumed.weights_root.iterdir()) == [
        "step_0000002",
        "step_0000003",
    ]


@pytest.mark.parametrize("async_load", [False, True])
def test_lora_trains_an_adapter_and_reports_a_server_without_lora(
    tmp_path, tiny_model, run_api, async_load
):
    """A server that cannot load adapters fails the refresh (synchronous) or the next one (the
    asynchronous load's failure surfaces one step later): never a silent no-op."""
    from transformers import AutoModelForCausalLM

    api = run_api("--store", "memory")  # a real HTTP server that has no LoRA endpoint
    cfg = _cfg(
        tmp_path,
        weight_refresh="lora",
        inference_urls=[api.url],
        inference_server="atropos",
        lora_rank=2,
        lora_alpha=4,
        async_lora_load=async_load,
    )
    strategy = LoraRefresh(cfg)
    model = strategy.prepare_model(AutoModelForCausalLM.from_pretrained(tiny_model))
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    if async_load:
        row = strategy.refresh(1, model, None)  # the load runs in the background
        assert row["server_load_s"] is None and row["weights_version_step"] is None
        with pytest.raises(InferenceError, match="load_lora_adapter"):
            strategy.refresh(2, model, None)
    else:
        with pytest.raises(InferenceError, match="load_lora_adapter"):
            strategy.refresh(1, model, None)
    saved = tmp_path / "out" / "weights" / "step_0000001"
    assert (saved / "adapter_config.json").exists() and not (saved / "model.safetensors").exists()
    strategy.close()


def test_reload_against_a_server_without_the_endpoint_fails_clearly(tmp_path, tiny_model, run_api):
    from transformers import AutoModelForCausalLM

    api = run_api("--store", "memory")
    strategy = ReloadRefresh(
        _cfg(
            tmp_path,
            weight_refresh="reload",
            inference_urls=[api.url],
            inference_server="atropos",
            async_refresh=False,
        )
    )
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    with pytest.raises(InferenceError, match="update_weights_from_disk"):
        strategy.refresh(1, model, None)
    strategy.close()


def test_lora_resume_restores_the_trained_adapter(tmp_path, tiny_model):
    import torch
    from transformers import AutoModelForCausalLM

    from example_trainer.checkpoint import save_model_folder

    cfg = _cfg(tmp_path, weight_refresh="lora", lora_rank=2, lora_alpha=4)
    model = LoraRefresh(cfg).prepare_model(AutoModelForCausalLM.from_pretrained(tiny_model))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.fill_(0.5)  # a "trained" adapter (lora_B starts at zero)
    folder = save_model_folder(model, None, tmp_path / "ckpt")
    resumed = LoraRefresh(cfg).prepare_model(
        AutoModelForCausalLM.from_pretrained(tiny_model), resume_from=str(folder)
    )
    b = {n: p for n, p in resumed.named_parameters() if "lora_B" in n}
    assert b and all(p.requires_grad and torch.all(p == 0.5) for p in b.values())


@pytest.mark.parametrize("async_load", [False, True])
def test_lora_refresh_replaces_one_named_adapter_on_the_cpu_engine(
    tmp_path, tiny_model, async_load
):
    """Envs request one model name; after each refresh (asynchronous: once its load has landed) that
    name must serve the newest adapter."""
    import subprocess
    import sys
    import threading

    import httpx
    import torch
    from transformers import AutoModelForCausalLM

    from atroposlib.utils.net import free_port, wait_for_http

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "atroposlib.cli.serve_model",
            "--model",
            str(tiny_model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--torch-threads",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_http(url + "/health", timeout=90, proc=proc)
        cfg = _cfg(
            tmp_path,
            weight_refresh="lora",
            inference_urls=[url],
            lora_rank=2,
            lora_alpha=4,
            async_lora_load=async_load,
        )
        strategy = LoraRefresh(cfg)
        model = strategy.prepare_model(AutoModelForCausalLM.from_pretrained(tiny_model))
        body = {
            "model": "policy",
            "prompt": [5, 6, 7],
            "max_tokens": 1,
            "temperature": 0,
            "logprobs": 1,
        }

        def served_logprob() -> float:
            r = httpx.post(url + "/v1/completions", json=body, timeout=60)
            assert r.status_code == 200, r.text
            return r.json()["choices"][0]["logprobs"]["token_logprobs"][0]

        strategy.start(str(tiny_model))  # publishes the adapter before the first rollout
        seen = [served_logprob()]
        failures: list[str] = []
        stop = threading.Event()

        def sample_continuously() -> None:  # an env that never stops asking for "policy"
            while not stop.is_set():
                r = httpx.post(url + "/v1/completions", json=body, timeout=60)
                if r.status_code != 200:
                    failures.append(r.text)

        sampler = threading.Thread(target=sample_continuously)
        sampler.start()
        for step, fill in ((1, 0.0), (2, 0.7), (3, 0.0), (4, 0.7)):
            with torch.no_grad():
                for n, p in model.named_parameters():
                    if "lora_B" in n:
                        p.fill_(
                            fill
                        )  # step 1: a zero adapter (= base model); step 2: a changed one
            row = strategy.refresh(step, model, None)
            assert row["lora_name"] == "policy"
            # the newest load that had landed when the row was written: this step's when
            # synchronous; the one before (start's is step 0) when it runs beside the next step
            assert row["weights_version_step"] == (step - 1 if async_load else step)
            strategy.wait_published()
            seen.append(served_logprob())
        stop.set()
        sampler.join()
        strategy.close()
        assert not failures, failures[:3]  # the name never went missing between refreshes
        no_name = {k: v for k, v in body.items() if k != "model"}  # no name = the base model
        base = httpx.post(url + "/v1/completions", json=no_name, timeout=60).json()
        base_lp = base["choices"][0]["logprobs"]["token_logprobs"][0]
        # the fresh adapter (lora_B = 0) and the zero ones behave as the base model
        assert max(abs(seen[i] - base_lp) for i in (0, 1, 3)) < 1e-5
        assert abs(seen[2] - base_lp) > 1e-4 and abs(seen[4] - seen[2]) < 1e-6  # step-2/4 adapter
    finally:
        proc.terminate()
        proc.wait(30)


def test_restart_default_command_runs_vllm_with_its_own_python_and_cpu_flags(tmp_path):
    cfg = _cfg(tmp_path, weight_refresh="restart", inference_python="/opt/vllm/bin/python")
    refresh = RestartRefresh(cfg)
    cmd = refresh.command.format(
        model_path="M", port=1234, served_name="m", seq_len=512, python=refresh.python
    )
    argv = cmd.split()
    assert argv[:3] == ["/opt/vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert "--model M" in cmd and "--port 1234" in cmd and "--max-model-len 2048" in cmd  # seq_len
    import torch

    if torch.cuda.is_available():
        assert "--gpu-memory-utilization" in argv
    else:  # GPU-only flags only where CUDA is present; the CPU build's settings otherwise
        assert "--gpu-memory-utilization" not in argv and "--enforce-eager" in argv
        assert refresh.env is not None and refresh.env["VLLM_TARGET_DEVICE"] == "cpu"


def test_restart_custom_command_gets_the_python_placeholder(tmp_path, monkeypatch):
    monkeypatch.setenv("ATROPOS_VLLM_PYTHON", "/env/vllm/python")
    cfg = _cfg(
        tmp_path,
        weight_refresh="restart",
        inference_command="{python} -m vllm.entrypoints.openai.api_server --model {model_path} "
        "--port {port}",
    )
    refresh = RestartRefresh(cfg)
    assert refresh.python == "/env/vllm/python" and refresh.env is None
    refresh.python = "/no/such/python"
    with pytest.raises(InferenceError, match="/no/such/python"):
        refresh.start(str(tmp_path))


def test_weights_are_published_in_the_compute_dtype_and_their_size_is_logged(
    tmp_path, tiny_model, caplog
):
    """bf16 compute over fp32 masters publishes bf16 (half the bytes; the values the trainer computes
    with), the server's loader takes it in its own dtype, the tied LM head is written once, and the
    size is in the log line and the refresh metrics. Checkpoints keep the fp32 masters."""
    import json
    import logging

    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from atroposlib.inference.loading import load_causal_lm
    from example_trainer.checkpoint import save_model_folder, weights_bytes
    from example_trainer.precision import Precision, publish_dtype

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    with torch.no_grad():  # "trained": values that bf16 rounds
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 1e-3)
    mixed = Precision(compute=torch.bfloat16, master=torch.float32)
    assert publish_dtype(_cfg(tmp_path), mixed) == torch.bfloat16
    assert publish_dtype(_cfg(tmp_path, publish_dtype="float32"), mixed) == torch.float32
    fp32 = Precision(compute=torch.float32, master=torch.float32)
    assert publish_dtype(_cfg(tmp_path), fp32) == torch.float32  # CPU runs publish as before

    # a server that has no reload route: the save and its log line come first, then the push fails
    strategy = make_weight_refresh(
        _cfg(
            tmp_path,
            weight_refresh="reload",
            async_refresh=False,
            inference_server="atropos",
            inference_urls=["http://127.0.0.1:9"],
        ),
        publish_dtype=torch.bfloat16,
    )
    with caplog.at_level(logging.INFO, logger="example_trainer.weight_refresh"):
        with pytest.raises(InferenceError):
            strategy.refresh(1, model, None)
    folder = strategy.weights_root / "step_0000001"
    published = load_file(str(folder / "model.safetensors"))
    assert {t.dtype for t in published.values()} == {torch.bfloat16}
    assert "lm_head.weight" not in published  # tied to embed_tokens: written once
    assert json.loads((folder / "config.json").read_text())["dtype"] == "bfloat16"
    masters = save_model_folder(model, None, tmp_path / "fp32")
    assert {t.dtype for t in load_file(str(masters / "model.safetensors")).values()} == {
        torch.float32
    }
    size, full = weights_bytes(folder), weights_bytes(masters)
    assert size == strategy.last_saved_bytes and 0.45 < size / full < 0.55
    assert f"reload: step 1's weights saved, {size / 2**20:.1f} MiB in bfloat16" in caplog.text

    served = load_causal_lm(folder, "float32")  # what the CPU engine's reload does with it
    want = {n: p.detach().to(torch.bfloat16).float() for n, p in model.named_parameters()}
    for n, p in served.named_parameters():
        assert torch.equal(p, want[n]), n
