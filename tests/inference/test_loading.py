"""Loading model directories: clear ``ModelLoadError`` messages for folders that are not models."""

from __future__ import annotations

import shutil

import pytest

from atroposlib.errors import ModelLoadError
from atroposlib.inference.loading import load_model_dir


def test_bad_directories_raise_model_load_error(tmp_path, tiny_model_dir):
    with pytest.raises(ModelLoadError, match="not found"):
        load_model_dir(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ModelLoadError, match="not a directory"):
        load_model_dir(tmp_path / "file")
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ModelLoadError, match="could not load a causal LM"):
        load_model_dir(broken)


def test_loaded_model_knows_pad_eos_and_context(tiny_model_dir):
    lm = load_model_dir(tiny_model_dir)
    tok = lm.tokenizer
    assert lm.pad_id == tok.pad_token_id
    assert tok.eos_token_id in lm.eos_ids
    assert lm.max_model_len == lm.model.config.max_position_embeddings
    assert lm.path == tiny_model_dir.resolve()


def test_device_option_refuses_a_missing_gpu_and_a_bad_name(tiny_model_dir):
    """`atropos-serve-model --device cuda` (the GPU check runs our engine on CUDA): a machine without
    one gets a ModelLoadError, and a device name that is not cpu/cuda/cuda:N is refused up front."""
    import torch
    from pydantic import ValidationError

    from atroposlib.inference.config import EngineConfig

    assert EngineConfig(model_path="m", device="cuda:1").device == "cuda:1"
    with pytest.raises(ValidationError):
        EngineConfig(model_path="m", device="gpu")
    assert load_model_dir(tiny_model_dir, device="cpu").model.device.type == "cpu"
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    with pytest.raises(ModelLoadError, match="could not move the model .* to cuda"):
        load_model_dir(tiny_model_dir, device="cuda")
