"""A chat model (and optionally a LoRA adapter) loaded for greedy batched generation: float32, eval
mode, its tokenizer padding on the left. What the held-out measurements of every chat preset load."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional


def load_chat_policy(
    model_dir: str | Path, adapter_dir: Optional[str | Path] = None
) -> tuple[Any, Any]:
    """(model in eval mode, with ``adapter_dir``'s adapter when given; tokenizer padding on the left)."""
    import warnings

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from atroposlib.utils.hf_compat import dtype_kwargs

    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning)  # peft on newer transformers
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), **dtype_kwargs(torch.float32))
    if adapter_dir is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter_dir))
    return model.eval(), tok
