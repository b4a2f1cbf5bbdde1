"""`atropos-make-tiny-model OUT_DIR`: build a tiny Llama model + BPE tokenizer offline (see docs/inference.md).

Every size is checked (``tiny_model_problem``) before torch is imported or a folder is created; a
mistake is one line and exit status 2, and a build that fails later leaves no folder behind.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from atroposlib.errors import AtroposError
from atroposlib.utils.cli import CliParser, fail, non_negative_int, positive_int

PROG = "atropos-make-tiny-model"
# The flag of each build_tiny_model argument, so that a size error names what the user typed.
FLAG_NAMES = {
    "seed": "--seed",
    "hidden_size": "--hidden-size",
    "num_layers": "--layers",
    "num_heads": "--heads",
    "vocab_size": "--vocab-size",
    "max_position_embeddings": "--max-positions",
}


def build_parser() -> argparse.ArgumentParser:
    p = CliParser(
        prog=PROG,
        description="Build a tiny randomly initialised Llama model and a byte-level BPE tokenizer "
        "(ChatML chat template) and save them as a standard transformers folder.",
    )
    p.add_argument("out_dir", help="directory to write the model folder into (created if missing)")
    p.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed for weights and corpus (default 0)"
    )
    p.add_argument(
        "--hidden-size", type=positive_int, default=128, help="hidden size (default 128)"
    )
    p.add_argument(
        "--layers", type=positive_int, default=4, help="number of decoder layers (default 4)"
    )
    p.add_argument(
        "--heads",
        type=positive_int,
        default=4,
        help="attention heads; must divide --hidden-size into an even head size (default 4)",
    )
    p.add_argument(
        "--vocab-size",
        type=positive_int,
        default=512,
        help="tokenizer vocabulary size, at least 260 (default 512)",
    )
    p.add_argument(
        "--max-positions", type=positive_int, default=512, help="context length (default 512)"
    )
    p.add_argument(
        "--corpus", default=None, help="text file to train the tokenizer on (one doc per line)"
    )
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    sizes = {
        "seed": args.seed,
        "hidden_size": args.hidden_size,
        "num_layers": args.layers,
        "num_heads": args.heads,
        "vocab_size": args.vocab_size,
        "max_position_embeddings": args.max_positions,
    }
    from atroposlib.inference.tiny_model import tiny_model_problem

    problem = tiny_model_problem(**sizes, names=FLAG_NAMES)
    if problem:
        return fail(PROG, problem)
    try:
        from atroposlib.inference.tiny_model import build_tiny_model

        out = build_tiny_model(args.out_dir, corpus=args.corpus, **sizes)
    except (AtroposError, OSError) as e:  # OSError: OUT_DIR is a file, not writable, disk full
        return fail(PROG, e)
    except (MemoryError, RuntimeError) as e:  # torch could not allocate the weights
        return fail(PROG, f"could not build the model: {str(e).splitlines()[0]}", 1)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
