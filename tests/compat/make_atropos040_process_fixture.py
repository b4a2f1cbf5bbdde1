"""Record the ``process`` lines PyPI atroposlib 0.4.0 writes for ``envs/fixed_groups_env.py``.

The env file runs under Atropos's own library (a separate virtual environment, never this
project's) and its JSONL lines are saved to ``fixtures/atropos040_process_lines.json``, which
``test_process_output_keys.py`` compares key by key with what this library's ``process`` writes
for the same groups. Made with::

    python3 -m venv /tmp/atr04
    /tmp/atr04/bin/pip install torch==2.13.0 && /tmp/atr04/bin/pip install atroposlib==0.4.0
    PYTHONPATH=$PWD python tests/compat/make_atropos040_process_fixture.py --atropos-python /tmp/atr04/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENV_FILE = HERE / "envs" / "fixed_groups_env.py"
FIXTURE = HERE / "fixtures" / "atropos040_process_lines.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atropos-python", default="/tmp/atr04/bin/python")
    args = parser.parse_args()
    from atroposlib.testing import tiny_tokenizer_dir  # this project: only for a local tokenizer

    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # Atropos's own package
    environ.update(WANDB_MODE="disabled", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    version = subprocess.run(
        [
            args.atropos_python,
            "-c",
            "import importlib.metadata as m; print(m.version('atroposlib'))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=environ,
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "groups.jsonl"
        run = subprocess.run(
            [
                args.atropos_python,
                str(ENV_FILE),
                "process",
                "--env.tokenizer_name",
                str(tiny_tokenizer_dir()),
                "--env.data_path_to_save_groups",
                str(out),
                "--env.use_wandb",
                "false",
            ],
            capture_output=True,
            text=True,
            env=environ,
            cwd=tmp,
            timeout=600,
        )
        if run.returncode != 0 or not out.is_file():
            sys.exit(f"atroposlib {version} process failed:\n{run.stderr[-3000:]}")
        lines = [json.loads(x) for x in out.read_text().split("\n") if x.strip()]
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(
        json.dumps(
            {"atroposlib": version, "env_file": "envs/fixed_groups_env.py", "lines": lines},
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {len(lines)} line(s) of atroposlib {version} to {FIXTURE}")


if __name__ == "__main__":
    main()
