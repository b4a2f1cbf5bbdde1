"""How atroposlib launches vLLM: which Python, which flags on CPU and GPU, and the worker extension that
must load inside vLLM's own environment (so it may import nothing from atroposlib)."""

from __future__ import annotations

import ast

from atroposlib.inference.vllm_launch import default_vllm_venv, find_vllm_python, vllm_server
from atroposlib.inference.vllm_plugin import EXTENSION_CLASS, RELOAD_METHOD, extension_dir


def test_vllm_python_comes_from_the_env_var_then_a_finished_setup(tmp_path, monkeypatch):
    monkeypatch.delenv("ATROPOS_VLLM_PYTHON", raising=False)
    monkeypatch.setenv("ATROPOS_VLLM_VENV", str(tmp_path / "v"))
    assert default_vllm_venv() == tmp_path / "v"
    (tmp_path / "v" / "bin").mkdir(parents=True)
    (tmp_path / "v" / "bin" / "python").write_text("")
    assert find_vllm_python() is None  # a half-made environment (failed install) does not count
    (tmp_path / "v" / ".atroposlib-vllm-ok").write_text("")
    assert find_vllm_python() == str(tmp_path / "v" / "bin" / "python")
    monkeypatch.setenv("ATROPOS_VLLM_PYTHON", "/mine/python")
    assert find_vllm_python() == "/mine/python"


def test_cpu_and_gpu_flags_and_dev_mode():
    cpu = vllm_server("M", 9001, python="py", cuda=False, served_name="policy", max_model_len=256)
    assert cpu.argv[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"]
    assert "--enforce-eager" in cpu.argv and "--gpu-memory-utilization" not in cpu.argv
    assert cpu.env["VLLM_TARGET_DEVICE"] == "cpu" and "VLLM_SERVER_DEV_MODE" not in cpu.env
    # the CPU build's 128-token default block is longer than most prompts: the prefix cache would
    # never hold one, and a group's n samples would each prefill the whole prompt
    assert cpu.argv[cpu.argv.index("--block-size") + 1] == "32"
    own = vllm_server("M", 9001, python="py", cuda=False, extra_args=("--block-size", "64"))
    assert own.argv.count("--block-size") == 1 and own.argv[-1] == "64"
    gpu = vllm_server("M", 9001, python="py", cuda=True, dev_mode=True, lora_rank=12)
    assert "--block-size" not in gpu.argv
    assert "--gpu-memory-utilization" in gpu.argv and "--enforce-eager" not in gpu.argv
    assert gpu.argv[gpu.argv.index("--worker-extension-cls") + 1] == EXTENSION_CLASS
    assert gpu.argv[gpu.argv.index("--max-lora-rank") + 1] == "16"  # vLLM's next allowed size
    assert gpu.env["VLLM_SERVER_DEV_MODE"] == "1"
    assert gpu.env["PYTHONPATH"] == str(extension_dir())
    assert gpu.env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"


def test_worker_extension_is_importable_by_its_top_level_name_without_atroposlib():
    module, cls = EXTENSION_CLASS.split(".")
    src = extension_dir() / f"{module}.py"
    tree = ast.parse(src.read_text())
    imported = {
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in (n.names if isinstance(n, ast.Import) else [n])
    }
    assert not any(str(m).startswith("atroposlib") for m in imported), imported
    methods = {
        f.name
        for c in tree.body
        if isinstance(c, ast.ClassDef) and c.name == cls
        for f in c.body
        if isinstance(f, ast.FunctionDef)
    }
    assert RELOAD_METHOD in methods
