"""The official side of ``bench/bfcl_crosscheck.py``: BFCL's own pipeline on a model already served by a
local OpenAI-compatible server, run with the Python of the full bfcl-eval install
(``bash scripts/setup_bfcl.sh --official``). It imports only bfcl-eval and the standard library.

BFCL runs a model only by a registered name, so this wrapper adds one to its model table
(``MODEL_CONFIG_MAPPING``): prompt mode, BFCL's ``QuickTestingOSSHandler`` (its generic local-model
handler: the prompt is the tokenizer's own chat template over BFCL's system prompt and the question),
names kept as documented. Then it runs, in this process, what a user types:

    bfcl generate --model NAME --test-category CATS --skip-server-setup --local-model-path DIR \\
        --temperature T --run-ids --allow-overwrite
    bfcl evaluate --model NAME --test-category CATS --partial-eval

with ``$BFCL_PROJECT_ROOT`` at ``--root`` (where ``test_case_ids_to_generate.json`` names the entries,
and BFCL writes ``result/`` and ``score/``) and ``REMOTE_OPENAI_BASE_URL`` at the server. It prints one
JSON line: BFCL's accuracy and counts per category and the entries it failed (with its error type),
read from its own score files.

    python bench/bfcl_official_side.py --root DIR --base-url http://127.0.0.1:P/v1 --model-dir MODEL \\
        --ids ids.json [--temperature 0.001]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

NAME = "atropos-local/model"


def register(model_dir: str) -> None:
    """Add ``NAME`` to BFCL's model table (a prompt-mode local model)."""
    from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING, ModelConfig
    from bfcl_eval.model_handler.local_inference.quick_testing_oss import QuickTestingOSSHandler

    MODEL_CONFIG_MAPPING[NAME] = ModelConfig(
        model_name=model_dir,
        display_name="atropos cross-check",
        url="",
        org="",
        license="",
        model_handler=QuickTestingOSSHandler,
        input_price=None,
        output_price=None,
        is_fc_model=False,
        underscore_to_dot=False,
    )


def scores(root: Path, categories: list[str]) -> dict[str, dict[str, float]]:
    """BFCL's own figures per category: each score file's first line, and the failed entries after it."""
    out = {}
    for category in categories:
        found = sorted((root / "score").rglob(f"BFCL_v4_{category}_score.json"))
        if not found:
            raise SystemExit(f"bfcl_official_side: BFCL wrote no score file for {category}")
        lines = [json.loads(x) for x in found[0].read_text().split("\n") if x.strip()]
        head = lines[0]
        out[category] = {
            "accuracy": head["accuracy"],
            "correct": head["correct_count"],
            "total": head["total_count"],
            "failed": {row["id"]: row.get("error_type") for row in lines[1:]},
        }
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", type=Path, required=True)
    p.add_argument("--base-url", required=True)
    p.add_argument("--model-dir", required=True)
    p.add_argument("--ids", type=Path, required=True, help="{category: [entry id, ...]}")
    p.add_argument("--temperature", type=float, default=0.001)
    args = p.parse_args()
    ids = json.loads(args.ids.read_text())
    args.root.mkdir(parents=True, exist_ok=True)
    (args.root / "test_case_ids_to_generate.json").write_text(json.dumps(ids))
    os.environ["BFCL_PROJECT_ROOT"] = str(args.root)
    os.environ["REMOTE_OPENAI_BASE_URL"] = args.base_url
    os.environ["REMOTE_OPENAI_TOKENIZER_PATH"] = args.model_dir
    register(args.model_dir)
    from bfcl_eval.__main__ import cli

    categories = ",".join(ids)
    common = ["--model", NAME, "--test-category", categories]
    generate = [
        "generate",
        *common,
        "--skip-server-setup",
        "--local-model-path",
        args.model_dir,
        "--temperature",
        str(args.temperature),
        "--run-ids",
        "--allow-overwrite",
    ]
    for argv in (generate, ["evaluate", *common, "--partial-eval"]):
        try:
            cli(argv, standalone_mode=False)
        except SystemExit as exc:
            if exc.code:
                raise
    print(json.dumps(scores(args.root, list(ids))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
