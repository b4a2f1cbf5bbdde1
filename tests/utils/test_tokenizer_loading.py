"""One tokenizer loader for the package: the env runtime, the tools and the engine share it."""

from __future__ import annotations

import pytest

from atroposlib.errors import ModelLoadError
from atroposlib.inference.loading import load_tokenizer as engine_load
from atroposlib.report.tokenizer import TOOLS_HINT
from atroposlib.report.tokenizer import load_tokenizer as tools_load
from atroposlib.testing import tiny_tokenizer_dir
from atroposlib.utils.tokenizer_loading import ENV_HINT, load_tokenizer


def test_every_part_loads_the_same_tokenizer():
    d = tiny_tokenizer_dir()
    toks = [load_tokenizer(d), tools_load(str(d))]
    text = "<|im_start|>user\nhello 12+7<|im_end|>"
    assert toks[0].encode(text) == toks[1].encode(text)
    assert type(toks[0]) is type(toks[1])


@pytest.mark.parametrize(
    "load, hint", [(load_tokenizer, ENV_HINT), (tools_load, TOOLS_HINT)], ids=["env", "tools"]
)
def test_a_missing_or_non_directory_path_is_one_line_with_the_callers_hint(load, hint, tmp_path):
    a_file = tmp_path / "tok.json"
    a_file.write_text("{}")
    for name in (str(tmp_path / "nope"), str(a_file), "./relative/missing"):
        with pytest.raises(ModelLoadError) as e:
            load(name)
        msg = str(e.value)
        assert msg.startswith("tokenizer directory not found") and msg.endswith(hint)
        assert "\n" not in msg


def test_a_directory_without_a_tokenizer_says_why(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelLoadError) as e:
        engine_load(tmp_path)
    msg = str(e.value)
    assert msg.startswith("cannot load tokenizer") and "needs the tokenizer saved with it" in msg
    with pytest.raises(ModelLoadError, match="model directory not found"):
        engine_load(tmp_path / "missing")
