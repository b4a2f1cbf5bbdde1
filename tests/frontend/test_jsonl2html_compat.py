"""Atropos's ``atroposlib.frontend.jsonl2html`` names over the escaped HTML report."""

from __future__ import annotations

import json

import pytest

from atroposlib.frontend.jsonl2html import create_html_for_group, generate_html


def test_generate_html_and_one_group_card(tmp_path):
    group = {
        "tokens": [[1, 2], [3, 4]],
        "masks": [[-100, 2], [-100, 4]],
        "scores": [1.0, 0.0],
        "messages": [
            [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<b>bold</b>"}],
            [{"role": "user", "content": "q"}, {"role": "assistant", "content": "plain"}],
        ],
    }
    src = tmp_path / "groups.jsonl"
    src.write_text(json.dumps(group) + "\n")
    out = generate_html(str(src))
    assert out == str(tmp_path / "groups.html")
    html = (tmp_path / "groups.html").read_text()
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "<b>bold</b>" not in html
    card = create_html_for_group(group, 0)
    assert "plain" in card and "<b>bold" not in card
    with pytest.raises(FileNotFoundError):
        generate_html(str(tmp_path / "missing.jsonl"))


def test_the_moved_tool_modules_have_no_old_frontend_alias():
    """Only Atropos's ``frontend.jsonl2html`` path is kept; it is a plain module, not an alias."""
    import importlib

    import atroposlib.frontend.jsonl2html as j

    assert j.__name__ == "atroposlib.frontend.jsonl2html"
    for old in ["report", "render", "datagen", "datagen_cli", "viewer", "sources", "samples"]:
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"atroposlib.frontend.{old}")
