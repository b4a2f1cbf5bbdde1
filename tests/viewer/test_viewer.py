"""view-run's data side: filters, sources (file and a real run-api via /peek), error banners."""

from __future__ import annotations

import json
import re

import pytest

from atroposlib.api.client import TrajectoryClient
from atroposlib.errors import AuthError
from atroposlib.utils.net import free_port
from atroposlib.viewer.app import ALL_ENVS, ViewerState, env_names, parse_bound, render_view
from atroposlib.viewer.samples import sample_groups
from atroposlib.viewer.sources import ApiSource, FileSource


def group_titles(html: str) -> list[str]:
    return re.findall(r'<span class="gtitle">([^<]*)</span>', html)


def with_seq(groups):
    for i, g in enumerate(groups):
        g["seq"] = i + 1
    return groups


def test_render_view_newest_first_and_filters():
    groups = with_seq(sample_groups())  # mean scores: 0.5, 0, 0, 0.25 ; last env arithmetic_hard
    html, n = render_view(groups)
    assert n == 4 and group_titles(html) == ["Group #4", "Group #3", "Group #2", "Group #1"]
    html, n = render_view(groups, env="arithmetic_hard")
    assert n == 1 and group_titles(html) == ["Group #4"]
    html, n = render_view(groups, env=ALL_ENVS, min_score=0.2)
    assert group_titles(html) == ["Group #4", "Group #1"]
    html, n = render_view(groups, max_score=0.0)
    assert group_titles(html) == ["Group #3", "Group #2"]
    html, n = render_view(groups, min_score=5)
    assert n == 0 and "No groups match the filters (4 fetched)." in html
    html, n = render_view([])  # an empty source is not a filter result
    assert n == 0 and "No groups yet" in html and "match" not in html


def test_render_view_token_view_and_escaping():
    html, _ = render_view(
        with_seq(sample_groups()), token_text=lambda t: chr(t) if t < 128 else "?"
    )
    assert html.count('class="tok tok-trained"') > 10 and "logprob" in html and "advantage" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    html, _ = render_view(with_seq(sample_groups()), token_view=False)
    assert "tok-trained" not in html


def test_env_names_and_bounds():
    assert env_names([{"env_name": "b"}, {"env_id": 3}, {"env_name": "a"}, {}]) == [
        "a",
        "b",
        "env 3",
    ]
    assert parse_bound("", "min") == (None, "")
    assert parse_bound(" 0.5 ", "min") == (0.5, "")
    value, problem = parse_bound("abc", "min score")
    assert value is None and "'abc' is not a number" in problem


def test_file_source_rereads_growing_file(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    groups = sample_groups()
    path.write_text(json.dumps(groups[0]) + "\n")
    state = ViewerState(FileSource(path))
    html, status, choices = state.refresh(ALL_ENVS, "", "", 50, True)
    assert len(group_titles(html)) == 1 and "1 groups in file" in status
    with path.open("a") as fh:
        fh.write("garbage\n")
        for g in groups[1:]:
            fh.write(json.dumps(g) + "\n")
    html, status, choices = state.refresh(ALL_ENVS, "", "", 2, True)
    assert group_titles(html) == ["Group #4", "Group #3"]  # latest 2 of 4, newest first
    assert "1 unreadable lines skipped" in status
    assert choices == [ALL_ENVS, "arithmetic", "arithmetic_hard"]
    html, _, _ = state.refresh(ALL_ENVS, "x", "", 50, True)
    assert "min score &#x27;x&#x27; is not a number" in html
    with pytest.raises(FileNotFoundError):
        FileSource(tmp_path / "nope.jsonl")


def test_unreachable_api_becomes_a_banner():
    state = ViewerState(ApiSource(f"http://127.0.0.1:{free_port()}", timeout=2))
    html, status, choices = state.refresh(ALL_ENVS, "", "", 10, True)
    assert "Could not read API" in html and "error" in status and choices == [ALL_ENVS]
    assert state.errors == 1


def test_api_source_reads_with_peek_and_changes_nothing(run_api):
    api = run_api("--store", "memory", "--api-token", "tok")
    client = TrajectoryClient(api.url, token="tok")
    for g in sample_groups():
        client.post_scored_data(g)
    before = client.status()
    with pytest.raises(AuthError):
        ApiSource(api.url).fetch(10)  # no token: refused, as the API requires
    src = ApiSource(api.url, token="tok")
    got = src.fetch(3)
    assert [g["seq"] for g in got] == sorted(g["seq"] for g in got) and len(got) == 3
    assert got[-1]["group_id"] == "sample-3" and all(g["state"] == "queued" for g in got)
    state = ViewerState(src)
    html, status, _ = state.refresh(ALL_ENVS, "", "", 50, True)
    assert len(group_titles(html)) == 4 and "queue 4 groups" in status
    after = client.status()
    assert (
        (after.queue_size, after.current_step) == (before.queue_size, before.current_step) == (4, 0)
    )
    assert client.info().batch_size == -1  # nobody registered as trainer


def test_token_view_budget_keeps_pages_small():
    groups = with_seq(sample_groups())
    per_group = [sum(len(t) for t, m in zip(g["tokens"], g["masks"], strict=True)) for g in groups]
    assert all(n > 20 for n in per_group)
    html, n = render_view(groups, token_budget=10)  # room for no group's completions
    assert n == 4 and html.count('class="tokview"') == 0
    assert "token view left out for 4 older groups" in html
    html, _ = render_view(groups, token_budget=10**6)
    assert html.count('class="tokview"') == 16 and "left out" not in html


def test_view_survives_a_malformed_group():
    html, n = render_view([{"scores": {"x": 1}, "seq": 9}, *with_seq(sample_groups()[:1])])
    assert n == 2 and "Group 9" in html and "could not be shown" in html and "Group #1" in html
