"""The trainer's model loading, checkpointing and chunked head on the oldest transformers the package
declares (``transformers>=4.45``), whose ``from_pretrained`` has no ``dtype=`` keyword.

Runs in a subprocess against an old transformers installed apart from the project's environment:
``pip install --no-deps --target DIR transformers==4.45.2 tokenizers==0.20.3 huggingface-hub==0.26.5``
and ``ATROPOS_OLD_TRANSFORMERS=DIR``; skipped when that variable is unset.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _trainer_helpers import REPO, child_env

OLD = os.environ.get("ATROPOS_OLD_TRANSFORMERS")

SCRIPT = textwrap.dedent(
    """
    import sys, tempfile, torch, transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
    from transformers import PreTrainedTokenizerFast
    from example_trainer.batching import Sequence, collate
    from example_trainer.model_setup import enable_gradient_checkpointing, load_policy
    from example_trainer.train_step import forward_logprobs

    d = tempfile.mkdtemp()
    cfg = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, tie_word_embeddings=True)
    LlamaForCausalLM(cfg).save_pretrained(d)
    tok = Tokenizer(models.WordLevel({"<pad>": 0, "a": 1}, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>").save_pretrained(d)
    try:
        AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16)
        print("dtype= accepted")
    except TypeError:
        print("dtype= raises TypeError")
    model, _ = load_policy(d, torch.bfloat16, torch.device("cpu"))
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    model, _ = load_policy(d, torch.float32, torch.device("cpu"))
    enable_gradient_checkpointing(model)
    model.train()
    seq = Sequence(tokens=[1, 5, 7, 9, 11], trained=[False] + [True] * 4, advantages=[1.0] * 5,
                   score=1.0)
    mb = collate([seq])
    lp = forward_logprobs(model, mb, mb.targets.unsqueeze(-1), 2)
    lp.sum().backward()
    full = forward_logprobs(model, mb, mb.targets.unsqueeze(-1), 0)
    assert torch.allclose(lp, full, atol=1e-5)
    assert model.lm_head.weight.grad is not None
    print("transformers", transformers.__version__, "ok")
    """
)


@pytest.mark.skipif(not OLD, reason="set ATROPOS_OLD_TRANSFORMERS to an old transformers install")
def test_loading_checkpointing_and_chunked_head_on_the_oldest_declared_transformers(tmp_path):
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(Path(OLD)), env["PYTHONPATH"]])
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    version = proc.stdout.strip().splitlines()[-1].split()[1]
    assert version.startswith("4.")
    if tuple(int(x) for x in version.split(".")[:2]) < (4, 56):
        assert "dtype= raises TypeError" in proc.stdout  # what load_policy has to work around
