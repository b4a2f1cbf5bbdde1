"""An env on Atropos's ``TeacherDistillationEnv`` run by ``process`` as a real subprocess: the
teacher servers come from ``--teacher.*`` flags or a ``teacher:`` YAML section (the runtime's
config loader learns the namespace from the env class), and every written group carries the fake
teacher's top-k for each position of each sequence."""

from __future__ import annotations

import pytest

from atroposlib.testing import FakeOpenAIServer, fake_prompt_candidates, tiny_tokenizer_dir
from tests.compat.helpers import run_file
from tests.jsonl import read_jsonl


@pytest.mark.parametrize("via", ["flags", "yaml"])
def test_process_attaches_teacher_top_k(tmp_path, via):
    tok = str(tiny_tokenizer_dir())
    out = tmp_path / "groups.jsonl"
    with FakeOpenAIServer(tokenizer=tok) as teacher:
        fields = {
            "base_url": teacher.base_url,
            "model_name": "teacher",
            "server_type": "vllm",
            "tokenizer_name": tok,
        }
        if via == "flags":
            extra = [x for k, v in fields.items() for x in (f"--teacher.{k}", v)]
        else:
            yaml = tmp_path / "run.yaml"
            yaml.write_text("teacher:\n" + "".join(f"  {k}: {v}\n" for k, v in fields.items()))
            extra = ["--config", str(yaml)]
        r = run_file(
            "fixed_teacher_env.py",
            "process",
            "--env.tokenizer_name",
            tok,
            "--env.data_path_to_save_groups",
            str(out),
            *extra,
            cwd=tmp_path,
        )
        asked = [b["prompt"] for b in teacher.requests]
    assert r.returncode == 0, r.stderr[-3000:]
    groups = read_jsonl(out)
    assert len(groups) == 2
    for g in groups:
        assert len(g["distill_token_ids"]) == len(g["tokens"])
        for seq, ids, lps in zip(
            g["tokens"], g["distill_token_ids"], g["distill_logprobs"], strict=True
        ):
            assert seq in asked
            assert ids[0] == [] and len(ids) == len(lps) == len(seq)
            assert ids[1:] == [fake_prompt_candidates(seq, p, 2) for p in range(1, len(seq))]


def test_teacher_enabled_without_a_teacher_is_one_line(tmp_path):
    r = run_file(
        "fixed_teacher_env.py",
        "process",
        "--env.tokenizer_name",
        str(tiny_tokenizer_dir()),
        cwd=tmp_path,
    )
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "no teacher server configuration was provided" in r.stderr.strip().splitlines()[-1]
