"""The shared YAML config reader: each user mistake is a one-line ConfigError naming the file."""

from __future__ import annotations

import pytest

from atroposlib.errors import ConfigError
from atroposlib.utils.yaml_config import load_yaml_mapping


def test_reads_a_mapping_and_an_empty_file(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("env:\n  group_size: 4\nlr: -1.5e-4\n")
    assert load_yaml_mapping(good) == {"env": {"group_size": 4}, "lr": -1.5e-4}
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_yaml_mapping(empty) == {}


@pytest.mark.parametrize(
    "content, fragment",
    [
        (None, "no such file"),
        ("a: [1, 2\n", "not valid YAML"),
        ("- 1\n- 2\n", "top level must be a mapping"),
    ],
)
def test_user_mistakes_are_one_line_errors(tmp_path, content, fragment):
    path = tmp_path / "c.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as e:
        load_yaml_mapping(path, flag="--config")
    message = str(e.value)
    assert fragment in message and "\n" not in message and message.startswith("--config")


def test_malformed_yaml_names_line_and_column(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("env:\n  group_size: 4\n  bad: [1, 2\nlr: 1\n")
    with pytest.raises(ConfigError) as e:
        load_yaml_mapping(path, flag="--config")
    message = str(e.value)
    assert "not valid YAML at line 4, column 3" in message and "\n" not in message, message
