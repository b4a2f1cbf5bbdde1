"""``atroposlib.envs.teacher_distillation_env``: the cases of Atropos's own
``test_teacher_distillation_env.py``, against the project's fake OpenAI/vLLM server on loopback
(a real teacher ``get_logprobs`` over HTTP) where Atropos's test used a stand-in object.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from atroposlib.envs.server_handling.server_baseline import APIServerConfig
from atroposlib.envs.teacher_distillation_env import (
    TeacherDistillationConfig,
    TeacherDistillationEnv,
)
from atroposlib.errors import ConfigError
from atroposlib.runtime.config_loader import load_config
from atroposlib.testing import (
    FakeOpenAIServer,
    fake_prompt_candidates,
    tiny_tokenizer_dir,
)
from tests.compat.helpers import run_coro


class ConcreteTeacherEnv(TeacherDistillationEnv):
    async def get_next_item(self):
        return None

    async def evaluate(self, *args, **kwargs):
        return None


class DefaultTeacherEnv(ConcreteTeacherEnv):
    @classmethod
    def teacher_config_init(cls):
        return APIServerConfig(
            model_name="teacher-model", base_url="http://teacher:9/v1", server_type="vllm"
        )


def _group(overrides=None) -> dict:
    return {
        "tokens": [[1, 2, 3], [4, 5]],
        "group_overrides": overrides,
        "masks": [[-100, 2, 3], [-100, 5]],
        "scores": [1.0, 0.0],
    }


@pytest.fixture
def teacher() -> FakeOpenAIServer:
    with FakeOpenAIServer(tokenizer=tiny_tokenizer_dir()) as fake:
        yield fake


def _env(teacher_url: str, top_k: int = 2, enabled: bool = True, **teacher_fields):
    tok = str(tiny_tokenizer_dir())
    config = TeacherDistillationConfig(
        tokenizer_name=tok, teacher_enabled=enabled, teacher_top_k=top_k, use_wandb=False
    )
    fields = {"base_url": teacher_url, "model_name": "teacher", "server_type": "vllm"}
    fields.update({"tokenizer_name": tok, "max_retries": 1, **teacher_fields})
    return ConcreteTeacherEnv(
        config,
        [APIServerConfig(base_url="http://127.0.0.1:9/v1", server_type="vllm")],
        teacher_server_configs=[APIServerConfig(**fields)],
    )


def _attach(env, group):
    async def go():
        try:
            return await env._attach_teacher_distillation(group)
        finally:
            await env.teacher_server.close()

    return run_coro(go())


def test_attach_teacher_distillation_success(teacher):
    out = _attach(_env(teacher.base_url, top_k=2), _group())
    assert len(out["distill_token_ids"]) == 2
    assert len(out["distill_token_ids"][0]) == 3 and len(out["distill_logprobs"][1]) == 2
    assert out["distill_token_ids"][0][0] == []  # the first token has no prediction
    assert out["distill_token_ids"][0][1] == fake_prompt_candidates([1, 2, 3], 1, 2)
    assert [b["prompt_logprobs"] for b in teacher.requests] == [2, 2]
    assert all(b["prompt"] in ([1, 2, 3], [4, 5]) for b in teacher.requests)


def test_attach_teacher_distillation_failure_drops_payload(teacher):
    teacher.fail_next(1, status=400)  # one sequence's request is refused
    out = _attach(_env(teacher.base_url), _group())
    assert out["distill_token_ids"] is None and out["distill_logprobs"] is None


def test_attach_teacher_distillation_negative_topk_skips_fetch(teacher):
    out = _attach(_env(teacher.base_url, top_k=-1), _group())
    assert teacher.requests == []
    assert out["distill_token_ids"] is None and out["distill_logprobs"] is None


def test_attach_teacher_distillation_zero_topk_passthrough(teacher):
    group = _group()
    group["tokens"], group["masks"], group["scores"] = [[1, 2, 3]], [[-100, 2, 3]], [1.0]
    out = _attach(_env(teacher.base_url, top_k=0), group)
    assert len(teacher.requests) == 1
    assert out["distill_token_ids"] == [[[], [2], [3]]]  # the chosen token only
    assert out["distill_logprobs"] is not None


def test_attach_teacher_distillation_group_override_topk_is_used(teacher):
    out = _attach(_env(teacher.base_url, top_k=0), _group({"teacher_top_k": 7}))
    assert [b["prompt_logprobs"] for b in teacher.requests] == [7, 7]
    assert len(out["distill_token_ids"][0][2]) == 7


def test_attach_teacher_distillation_group_override_can_skip_fetch(teacher):
    out = _attach(_env(teacher.base_url), _group({"skip_teacher_top_k": True}))
    assert teacher.requests == []
    assert out["distill_token_ids"] is None and out["distill_logprobs"] is None


def test_teacher_tokenizer_mismatch_raises(tmp_path: Path, teacher):
    from atroposlib.inference.tiny_model import build_tokenizer

    other = tmp_path / "other-tok"
    build_tokenizer(["zz yy xx ww"] * 50, vocab_size=300).save_pretrained(str(other))
    with pytest.raises(ValueError, match="Cross-tokenizer distillation is not supported"):
        _env(teacher.base_url, tokenizer_name=str(other))
    with pytest.raises(ConfigError, match="could not be loaded"):  # one line on the CLI too
        _env(teacher.base_url, tokenizer_name=str(tmp_path / "missing"))


def test_init_requires_teacher_server_source():
    config = TeacherDistillationConfig(
        tokenizer_name=str(tiny_tokenizer_dir()), teacher_enabled=True
    )
    with pytest.raises(ValueError, match="no teacher server configuration was provided"):
        ConcreteTeacherEnv(config, [APIServerConfig(base_url="http://127.0.0.1:9/v1")])


def test_init_uses_explicit_and_bare_teacher_server_configs(teacher):
    tok = str(tiny_tokenizer_dir())
    explicit = APIServerConfig(
        model_name="explicit-model",
        tokenizer_name=tok,
        base_url=teacher.base_url,
        server_type="vllm",
    )
    config = TeacherDistillationConfig(tokenizer_name=tok, teacher_enabled=True)
    student = [APIServerConfig(base_url="http://127.0.0.1:9/v1")]
    for given in ([explicit], explicit):
        env = ConcreteTeacherEnv(config, student, teacher_server_configs=given)
        assert [s.config for s in env.teacher_server.servers] == [explicit]
    disabled = TeacherDistillationConfig(tokenizer_name=tok)
    assert ConcreteTeacherEnv(disabled, student).teacher_server is None


def test_teacher_servers_resolve_from_teacher_namespace(tmp_path: Path):
    assert "teacher" not in load_config(ConcreteTeacherEnv, "process", []).extra_servers
    assert DefaultTeacherEnv.server_namespaces()["teacher"].model_name == "teacher-model"
    yaml = tmp_path / "run.yaml"
    yaml.write_text("teacher:\n  tokenizer_name: teacher-tokenizer\n")
    loaded = load_config(
        DefaultTeacherEnv,
        "process",
        ["--config", str(yaml), "--teacher.base_url", "http://override:9/v1"],
    )
    [cfg] = loaded.extra_servers["teacher"]
    assert cfg.base_url == "http://override:9/v1"
    assert cfg.tokenizer_name == "teacher-tokenizer" and cfg.model_name == "teacher-model"
    assert loaded.servers != loaded.extra_servers["teacher"]  # --openai.* is left alone
    # with no default, flags alone make a teacher from APIServerConfig's defaults
    [only] = load_config(
        ConcreteTeacherEnv, "serve", ["--teacher.base_url", "http://t:9/v1"]
    ).extra_servers["teacher"]
    assert only.base_url == "http://t:9/v1" and only.server_type == "openai"
    with pytest.raises(ConfigError, match="unknown flag --teacher.bas_url"):
        load_config(ConcreteTeacherEnv, "serve", ["--teacher.bas_url", "http://t:9/v1"])
    with pytest.raises(ConfigError, match="unknown flag --teacher.base_url"):
        from tests.envs.example_env import AdditionEnv  # declares no teacher

        load_config(AdditionEnv, "serve", ["--teacher.base_url", "http://t:9/v1"])
