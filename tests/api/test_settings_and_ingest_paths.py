"""Settings precedence (defaults < ATROPOS_* env < flags) and the ingest fast path vs ScoredData."""

from __future__ import annotations

import random

import orjson
import pytest
from api_helpers import group
from pydantic import ValidationError

from atroposlib.api.http import ApiProblem
from atroposlib.api.routes.ingest import LEGACY_KEYS, build_group
from atroposlib.api.settings import ApiSettings
from atroposlib.errors import ConfigError
from atroposlib.type_definitions import ScoredData


def test_env_vars_override_defaults_and_flags_override_env(monkeypatch, tmp_path):
    monkeypatch.setenv("ATROPOS_DATA_DIR", str(tmp_path / "from-env"))
    monkeypatch.setenv("ATROPOS_API_TOKEN", "env-token")
    monkeypatch.setenv("ATROPOS_MAX_STALENESS", "3")
    monkeypatch.setenv("ATROPOS_CORS_ORIGINS", "http://a, http://b")
    s = ApiSettings.from_env(api_token="flag-token", port=None)
    assert s.data_dir == tmp_path / "from-env" and s.api_token == "flag-token"
    assert s.max_staleness == 3 and s.port == 8000 and s.cors_origins == ["http://a", "http://b"]
    monkeypatch.setenv("ATROPOS_MAX_QUEUED_SEQUENCES", "-5")
    with pytest.raises(ConfigError, match="max_queued_sequences"):
        ApiSettings.from_env()


def test_staleness_is_bounded_by_default_and_a_bound_below_1_is_one_line(monkeypatch, tmp_path):
    import subprocess
    import sys

    assert ApiSettings().max_staleness == 4
    for off in ("off", "None", " OFF "):
        assert ApiSettings.from_env(max_staleness=off).max_staleness is None
    for bad in ("0", "-2"):
        with pytest.raises(ConfigError, match="max_staleness.*greater than or equal to 1"):
            ApiSettings.from_env(max_staleness=bad)
    r = subprocess.run(
        [sys.executable, "-m", "atroposlib.cli.run_api", "--max-staleness", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    lines = [x for x in r.stderr.strip().split("\n") if x]
    assert r.returncode == 2 and len(lines) == 1 and "max_staleness" in lines[0], r.stderr


def _mutations(seed):
    rng = random.Random(seed)
    g = group(rng.randint(1, 4), length=rng.randint(1, 8), seed=seed)
    kind = rng.randint(0, 7)
    if kind == 0:
        g["masks"][0] = g["masks"][0] + [1]
    elif kind == 1:
        g["scores"] = g["scores"][:-1] or [1.0, 2.0]
    elif kind == 2:
        g["tokens"][0][0] = "7"
    elif kind == 3:
        g["tokens"][0][0] = 7.0
    elif kind == 4:
        g["inference_logprobs"] = g["inference_logprobs"][:-1] or [[1.0], [2.0]]
    elif kind == 5:
        g["messages"][0] = [{"content": "no role"}]
    elif kind == 6:
        g["tokens"] = []
    return g


@pytest.mark.parametrize("seed", range(60))
def test_fast_path_accepts_and_refuses_exactly_what_scored_data_does(seed):
    data = _mutations(seed)
    try:
        model = ScoredData.model_validate(data)
        expected = None
    except ValidationError as e:
        expected = e
    raw = orjson.dumps(data)
    if expected is not None:
        with pytest.raises(ApiProblem) as p:
            build_group(orjson.loads(raw), raw=raw)
        assert p.value.status_code == 422
        first = expected.errors()[0]["msg"].replace("Value error, ", "")
        assert first in p.value.error
        return
    stored = orjson.loads(build_group(orjson.loads(raw), raw=raw).blob)
    assert stored["tokens"] == model.tokens and stored["masks"] == model.masks
    assert all(k in stored for k in LEGACY_KEYS)
