"""`atropos-make-tiny-model OUT_DIR`: build a tiny Llama model + BPE tokenizer offline (see docs/inference.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from atroposlib.errors import AtroposError
from atroposlib.utils.cli import fail


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="atropos-make-tiny-model",
        description="Build a tiny randomly initialised Llama model and a byte-level BPE tokenizer "
        "(ChatML chat template) and save them as a standard transformers folder.",
    )
    p.add_argument("out_dir", help="directory to write the model folder into (created if missing)")
    p.add_argument("--seed", type=int, default=0, help="seed for weights and corpus (default 0)")
    p.add_argument("--hidden-size", type=int, default=128, help="hidden size (default 128)")
    p.add_argument("--layers", type=int, default=4, help="number of decoder layers (default 4)")
    p.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    p.add_argument(
        "--vocab-size", type=int, default=512, help="tokenizer vocabulary size (default 512)"
    )
    p.add_argument("--max-positions", type=int, default=512, help="context length (default 512)")
    p.add_argument(
        "--corpus", default=None, help="text file to train the tokenizer on (one doc per line)"
    )
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        from atroposlib.inference.tiny_model import build_tiny_model

        out = build_tiny_model(
            args.out_dir,
            seed=args.seed,
            hidden_size=args.hidden_size,
            num_layers=args.layers,
            num_heads=args.heads,
            vocab_size=args.vocab_size,
            corpus=args.corpus,
            max_position_embeddings=args.max_positions,
        )
    except (AtroposError, OSError) as e:  # OSError: OUT_DIR is a file, not writable, disk full
        return fail("atropos-make-tiny-model", e)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
