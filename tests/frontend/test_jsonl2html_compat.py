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


def test_the_old_frontend_paths_are_the_moved_modules():
    import importlib

    for old, new in [
        ("report", "atroposlib.report.html"),
        ("render", "atroposlib.report.render"),
        ("jsonl2html", "atroposlib.report.jsonl2html"),
        ("datagen", "atroposlib.datagen.export"),
        ("datagen_cli", "atroposlib.datagen.cli"),
        ("viewer", "atroposlib.viewer.app"),
        ("sources", "atroposlib.viewer.sources"),
        ("samples", "atroposlib.viewer.samples"),
    ]:
        assert importlib.import_module(f"atroposlib.frontend.{old}") is importlib.import_module(new)
