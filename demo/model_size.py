"""The parameter count of a saved model, read from its safetensors tensor shapes (nothing loaded)."""

from __future__ import annotations

from pathlib import Path


def checkpoint_params(model_dir: Path) -> int:
    """Parameters stored in ``model_dir/model.safetensors``."""
    from safetensors import safe_open

    n_params = 0
    with safe_open(str(model_dir / "model.safetensors"), "pt") as f:
        for k in f.keys():
            size = 1
            for d in f.get_slice(k).get_shape():
                size *= int(d)
            n_params += size
    return n_params
