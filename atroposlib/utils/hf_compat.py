"""Differences between the transformers releases the package supports (``transformers>=4.45``).

``from_pretrained`` takes the weights' dtype as ``dtype=`` from transformers 4.56 and as ``torch_dtype=``
before it (older releases pass an unknown ``dtype=`` on to the model's ``__init__``, which raises
``TypeError``; newer ones still accept ``torch_dtype=`` with a deprecation warning).
"""

from __future__ import annotations

import re
from typing import Any, Optional

DTYPE_KWARG_SINCE = (4, 56)


def _version_tuple(version: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", version)
    if not m:
        raise ValueError(f"not a transformers version: {version!r}")
    return int(m.group(1)), int(m.group(2))


def dtype_kwargs(dtype: Any, transformers_version: Optional[str] = None) -> dict[str, Any]:
    """``{"dtype": dtype}`` or ``{"torch_dtype": dtype}``, whichever the installed (or given)
    transformers version's ``from_pretrained`` understands."""
    if transformers_version is None:
        import transformers

        transformers_version = transformers.__version__
    key = "dtype" if _version_tuple(transformers_version) >= DTYPE_KWARG_SINCE else "torch_dtype"
    return {key: dtype}
