"""A real engine server (uvicorn on loopback, the real app and engine on the tiny model) whose model
faults whenever a prefill holds the token ``POISON``: a stand-in for a fault that one request causes
inside a generation batch. ``python -m tests.inference.poison_server MODEL_DIR PORT``; used by
``test_engine_isolation.py``. The fault is injected into the model only; everything else is the
server a user runs."""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any

POISON = 7  # a token id of the tiny model's vocabulary


def main(model_dir: str, port: int) -> None:
    import uvicorn

    from atroposlib.inference.config import EngineConfig
    from atroposlib.inference.engine import InferenceEngine
    from atroposlib.inference.server import create_app

    logging.basicConfig(level="WARNING", format="%(levelname)s %(name)s: %(message)s")
    config = EngineConfig(
        model_path=model_dir, port=port, torch_threads=1, batch_window_ms=300, activity_interval=0
    )
    engine = InferenceEngine(config)
    model = engine.loaded.model
    forward = model.forward

    @functools.wraps(forward)
    def faulty_forward(*args: Any, **kw: Any) -> Any:
        ids = kw.get("input_ids")
        if ids is not None and ids.shape[1] > 1 and bool((ids == POISON).any()):
            raise RuntimeError("injected fault: a prefill holds the poison token")
        return forward(*args, **kw)

    model.forward = faulty_forward
    uvicorn.run(create_app(config, engine), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
