"""Topology validation: unknown keys with a "did you mean", URLs the launcher owns, GPUs that are not
there, missing env files: one line each (exit 2 from the CLI, nothing created)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from atroposlib.cli.launch import main
from atroposlib.errors import ConfigError
from atroposlib.launch.plan import build_plan
from atroposlib.launch.topology import load_topology, parse_topology

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "launch" / "demo_cpu.yaml"


def _demo() -> dict:
    return yaml.safe_load(DEMO.read_text())


def _error(data: dict) -> str:
    with pytest.raises(ConfigError) as e:
        parse_topology(data)
    return str(e.value)


def test_the_shipped_demo_topology_is_valid():
    topo = load_topology(DEMO)
    assert [g.kind for g in topo.inference] == ["engine"] and topo.envs[0].replicas == 1


def test_unknown_keys_get_a_did_you_mean():
    data = _demo()
    data["trainer"]["nproc_per_nod"] = 2
    data["inference"][0]["tensor_paralel"] = 2
    msg = _error(data)
    assert "trainer.nproc_per_nod: unknown key; did you mean nproc_per_node?" in msg
    assert "inference[0].tensor_paralel: unknown key; did you mean tensor_parallel?" in msg
    assert "\n" not in msg


def test_bad_values_name_their_field():
    data = _demo()
    data["envs"][0]["replicas"] = 0
    data["inference"][0]["kind"] = "vlm"
    msg = _error(data)
    assert "envs[0].replicas" in msg and "inference[0].kind" in msg


def test_urls_are_the_launchers_to_fill():
    data = _demo()
    data["trainer"]["flags"]["api_url"] = "http://x:1"
    assert "trainer: flags.api_url is set by the launcher" in _error(data)
    data = _demo()
    data["envs"][0]["flags"]["env"]["rollout_server_url"] = "http://x:1"
    with pytest.raises(ConfigError, match="is set by the launcher"):
        build_plan(parse_topology(data), Path("/tmp/x"), "local", gpus_here=0)


def test_external_servers_need_urls_and_others_a_model():
    data = _demo()
    data["inference"][0] = {"name": "ext", "kind": "external"}
    assert "kind external needs urls" in _error(data)
    data["inference"][0] = {
        "name": "v",
        "kind": "vllm",
        "gpus": 2,
        "tensor_parallel": 4,
        "model": "m",
    }
    assert "tensor_parallel 4 > gpus 2" in _error(data)


def test_an_env_group_names_only_known_inference_groups():
    data = _demo()
    data["envs"][0]["inference"] = ["engin"]
    assert "unknown inference group 'engin'; did you mean engine?" in _error(data)


def test_the_plan_fills_every_url_once():
    data = _demo()
    data["inference"][0]["count"] = 2
    data["envs"][0]["replicas"] = 2
    plan = build_plan(parse_topology(data), Path("/tmp/run"), "local", gpus_here=0)
    engines = [c.url for c in plan.by_role("inference")]
    envs = plan.by_role("env")
    trainer = plan.by_role("trainer")[0].argv
    assert len(engines) == 2 and len(set(engines)) == 2
    for e in envs:
        base = e.argv[e.argv.index("--openai.base_url") + 1]
        assert base == ",".join(u + "/v1" for u in engines)
        assert e.argv[e.argv.index("--env.rollout_server_url") + 1] == plan.api_url
    assert trainer[trainer.index("--api-url") + 1] == plan.api_url
    i = trainer.index("--inference-urls")
    assert trainer[i + 1 : i + 3] == engines
    spools = {e.argv[e.argv.index("--env.spool_dir") + 1] for e in envs}
    seeds = [e.argv[e.argv.index("--env.seed") + 1] for e in envs]
    assert len(spools) == 2 and seeds == ["0", "1"]  # replicas keep their own spool and prompts


def _cli(tmp_path: Path, data: dict, *extra: str, capsys) -> tuple[int, str]:
    topo = tmp_path / "t.yaml"
    topo.write_text(yaml.safe_dump(data))
    code = main(["run", str(topo), "--out", str(tmp_path / "run"), *extra])
    err = capsys.readouterr().err
    return code, err


def test_cli_unknown_key_is_one_line_exit_2_nothing_started(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    data = _demo()
    data["trainr"] = {}
    code, err = _cli(tmp_path, data, capsys=capsys)
    assert (
        code == 2 and err.count("\n") == 1 and "trainr: unknown key; did you mean trainer?" in err
    )
    assert not (tmp_path / "run").exists()


def test_cli_gpus_where_there_are_none(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    data = _demo()
    data["inference"][0]["gpus"] = 1
    code, err = _cli(tmp_path, data, capsys=capsys)
    assert code == 2 and "asks for 1 GPU(s) but this machine has 0" in err
    assert not (tmp_path / "run").exists()


def test_cli_missing_env_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    data = _demo()
    data["envs"][0]["file"] = "environments/no_such_env.py"
    code, err = _cli(tmp_path, data, capsys=capsys)
    assert code == 2 and "envs[0].file: no such file 'environments/no_such_env.py'" in err
    assert not (tmp_path / "run").exists()


def test_cli_bad_yaml_and_bad_override(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    code, err = _cli(tmp_path, _demo(), "--set", "envs.3.replicas=2", capsys=capsys)
    assert code == 2 and "not an index of a 1-item list" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("api: [\n")
    assert main(["run", str(bad), "--out", str(tmp_path / "run")]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def test_cli_local_backend_refuses_a_multi_node_trainer(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    data = _demo()
    data["trainer"]["nnodes"] = 2
    code, err = _cli(tmp_path, data, capsys=capsys)
    assert code == 2 and "the local backend runs on one machine" in err


def test_resume_resumes_the_api_and_the_trainer():
    topo = parse_topology(_demo())
    fresh = build_plan(topo, Path("/tmp/run"), "local", gpus_here=0)
    again = build_plan(topo, Path("/tmp/run"), "local", gpus_here=0, resume=True)
    assert (
        "--fresh" in fresh.by_role("api")[0].argv
        and "--resume" not in fresh.by_role("trainer")[0].argv
    )
    assert (
        "--resume" in again.by_role("api")[0].argv
        and "--resume" in again.by_role("trainer")[0].argv
    )


def test_resume_needs_an_earlier_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    code, err = _cli(tmp_path, _demo(), "--resume", capsys=capsys)
    assert code == 2 and "--resume: " in err and "holds no earlier run" in err
