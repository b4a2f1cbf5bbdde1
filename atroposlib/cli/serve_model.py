"""`atropos-serve-model --model DIR`: serve a local transformers model over an OpenAI-compatible HTTP API.

See docs/inference.md. A bad model directory prints one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional

from pydantic import ValidationError

from atroposlib.errors import AtroposError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="atropos-serve-model",
        description="Serve a local transformers causal LM with batched CPU generation "
        "(OpenAI-compatible /v1/completions and /v1/chat/completions).",
    )
    p.add_argument(
        "--model", required=True, help="local model directory (config.json, weights, tokenizer)"
    )
    p.add_argument(
        "--served-model-name", default=None, help="model name to report (default: dir name)"
    )
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=9001, help="port (default 9001)")
    p.add_argument(
        "--max-batch-size", type=int, default=64, help="most rows per batch (default 64)"
    )
    p.add_argument(
        "--batch-window-ms", type=float, default=5.0, help="batch collection window (default 5)"
    )
    p.add_argument(
        "--no-batching", action="store_true", help="one request row at a time (baseline)"
    )
    p.add_argument(
        "--max-queue", type=int, default=1024, help="queued requests before 503 (default 1024)"
    )
    p.add_argument(
        "--torch-threads",
        type=int,
        default=None,
        help="torch threads (default: half the cores, at least 1)",
    )
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    p.add_argument("--max-model-len", type=int, default=None, help="context length override")
    p.add_argument(
        "--default-max-tokens", type=int, default=16, help="completions max_tokens default"
    )
    p.add_argument("--log-level", default="info", help="log level (default info)")
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        from atroposlib.inference.config import EngineConfig

        config = EngineConfig(
            model_path=args.model,
            served_model_name=args.served_model_name,
            host=args.host,
            port=args.port,
            max_batch_size=1 if args.no_batching else args.max_batch_size,
            batch_window_ms=0.0 if args.no_batching else args.batch_window_ms,
            max_queue=args.max_queue,
            torch_threads=args.torch_threads,
            dtype=args.dtype,
            device=args.device,
            max_model_len=args.max_model_len,
            default_max_tokens=args.default_max_tokens,
            log_level=args.log_level,
        )
    except ValidationError as e:
        err = e.errors()[0]
        print(
            f"atropos-serve-model: error: --{str(err['loc'][0]).replace('_', '-')}: {err['msg']}",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        from pathlib import Path

        from atroposlib.inference.loading import check_model_dir

        check_model_dir(Path(config.model_path).expanduser())  # fail fast, before torch is imported
        from atroposlib.inference.server import create_app

        app = create_app(config)
    except AtroposError as e:
        print(f"atropos-serve-model: error: {e}", file=sys.stderr)
        return 2
    import uvicorn

    uvicorn.run(app, host=config.host, port=config.port, log_level=config.log_level.lower())
    return 0


if __name__ == "__main__":
    sys.exit(main())
