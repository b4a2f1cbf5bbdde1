"""The one loader of a chat policy for greedy batched generation (the held-out measurements of the
SmolLM2 arithmetic and calculator presets): eval mode, left padding, the adapter applied when given."""

from __future__ import annotations

import pytest
import torch

from demo.chat_policy import load_chat_policy


@pytest.fixture(scope="module")
def base_and_adapter(tmp_path_factory):
    from atroposlib.inference.tiny_model import build_tiny_model
    from demo.chat_sft import lora_model

    root = tmp_path_factory.mktemp("policy")
    base = build_tiny_model(root / "base", seed=0, hidden_size=32, num_layers=1, num_heads=2)
    model, _ = lora_model(base, 2, ["q_proj", "v_proj"])
    for name, p in model.named_parameters():
        if "lora_B" in name:  # a fresh LoRA adds nothing: give it weights that change the output
            torch.nn.init.normal_(p, std=1.0)
    model.save_pretrained(root / "adapter")
    return base, root / "adapter"


def test_the_base_model_loads_for_greedy_batches(base_and_adapter):
    base, _ = base_and_adapter
    model, tok = load_chat_policy(base)
    assert tok.padding_side == "left" and not model.training
    assert next(model.parameters()).dtype == torch.float32


def test_the_adapter_is_applied(base_and_adapter):
    from peft import PeftModel

    base, adapter = base_and_adapter
    plain, tok = load_chat_policy(base)
    tuned, _ = load_chat_policy(base, adapter)
    assert isinstance(tuned, PeftModel) and not tuned.training
    ids = torch.tensor([tok.encode("12 * 34", add_special_tokens=False)])
    with torch.no_grad():
        assert not torch.allclose(plain(ids).logits, tuned(ids).logits)
