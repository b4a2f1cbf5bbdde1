"""A ``process`` line holds every key Atropos 0.4.0 writes, with Atropos's values (null or empty as
it writes them), for the same groups.

``fixtures/atropos040_process_lines.json`` holds the lines PyPI atroposlib 0.4.0 wrote for
``envs/fixed_groups_env.py`` (made by ``make_atropos040_process_fixture.py``); here the same env file
runs through this library's ``process`` and each of its lines is compared key by key. Keys of ours
on top (``group_id``) are allowed.
"""

from __future__ import annotations

import json
from pathlib import Path

from atroposlib.testing import tiny_tokenizer_dir
from atroposlib.type_definitions import validate_group
from tests.compat.helpers import run_file
from tests.jsonl import read_jsonl

FIXTURE = Path(__file__).with_name("fixtures") / "atropos040_process_lines.json"


def test_process_lines_hold_every_key_atropos_writes(tmp_path):
    recorded = json.loads(FIXTURE.read_text())
    assert recorded["atroposlib"] == "0.4.0"
    out = tmp_path / "groups.jsonl"
    r = run_file(
        "fixed_groups_env.py",
        "process",
        "--env.tokenizer_name",
        str(tiny_tokenizer_dir()),
        "--env.data_path_to_save_groups",
        str(out),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    ours = {json.dumps(g["tokens"]): g for g in read_jsonl(out)}
    assert len(ours) == len(recorded["lines"]) == 2
    for theirs in recorded["lines"]:
        line = ours[json.dumps(theirs["tokens"])]
        for key, value in theirs.items():
            assert key in line, f"{key!r} missing from our line (Atropos wrote {value!r})"
            assert line[key] == value, (key, line[key], value)
        assert set(line) - set(theirs) <= {
            "group_id",
            "inference_logprobs",
            "generation_params",
            "env_id",
            "advantages",
            "ref_logprobs",
            "images",
            "overrides",
            "group_overrides",
        }
        validate_group(line)  # an Atropos-shaped line (empty lists included) is a valid group
