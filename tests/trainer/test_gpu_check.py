"""scripts/gpu_check.sh and its wheel bundle, tested here the way the borrowed GPU machine will run them.

That machine (docs/training.md) has no internet, Python 3.12, torch with CUDA, transformers 5.17 and a
few more, but no pydantic, fastapi, uvicorn, orjson, tenacity or openai. These tests build a stand-in: a
venv holding only what scripts/gpu_machine.txt lists, plus the bundle scripts/build_gpu_bundle.sh makes,
and check that the check installs the bundle offline and gets as far as it can without a GPU:

* Python 3.12 (or the closest version found: then the skip/notes say so), without torch (no CPU build of
  torch installs here for 3.12): past the bundle install and the imports of run-api and the engine's
  server, then one line "torch is not installed", exit 1;
* Python 3.11 with the local CPU build of torch (the only torch that installs here): past every import,
  then one line "no CUDA device", exit 1; and with ``--device cpu`` the whole check (trainer steps and the
  loop of run-api, engine, env and trainer) runs in that stand-in, so nothing it needs at run time is
  missing from the bundle either.

The venvs and bundles are built once and cached under ~/.cache/atroposlib (or $ATROPOS_GPU_EMU_CACHE),
keyed by the files that define them; if one cannot be built (no PyPI, no such Python), the test skips
with the reason, recorded in install-failed.txt there (delete it to try again).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
from _trainer_helpers import REPO, child_env

SCRIPTS = REPO / "scripts"
CACHE = Path(os.environ.get("ATROPOS_GPU_EMU_CACHE", Path.home() / ".cache" / "atroposlib"))
NO_CUDA = (
    "gpu_check: error: no CUDA device (torch.cuda.is_available() is False); run this on a machine "
    "with an NVIDIA GPU and a CUDA build of torch"
)
TORCH_CPU = "torch==2.13.0"  # the CPU build that installs here (Python 3.11 only)


def _key(*names: str) -> str:
    h = hashlib.sha256()
    for n in names:
        h.update((REPO / n).read_bytes())
    return h.hexdigest()[:12]


def _python(version: str) -> Optional[str]:
    """An interpreter of exactly ``version`` (PATH or pyenv), or None."""
    candidates = [shutil.which(f"python{version}")]
    candidates += sorted(
        str(p) for p in Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}")
    )
    for exe in filter(None, candidates):
        proc = subprocess.run(
            [exe, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0 and proc.stdout.strip() == version:
            return exe
    return None


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".lock", "w") as fh:  # another pytest run may be building the same thing
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _cached(dest: Path, ok_name: str, cmd: list[str], what: str) -> Path:
    """Run ``cmd`` once to build ``dest`` (done when ``dest/ok_name`` exists); skip on failure."""
    failed = dest.parent / f"{dest.name}.install-failed.txt"
    with _locked(dest):
        if (dest / ok_name).exists():
            return dest
        if failed.exists():
            pytest.skip(
                f"{what} could not be set up earlier: {failed.read_text().strip()} ({failed})"
            )
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=280)
        if proc.returncode != 0 or not (dest / ok_name).exists():
            reason = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            failed.write_text(reason + "\n")
            pytest.skip(f"{what} could not be set up: {reason}")
    return dest


def _machine_venv(python: str, version: str, torch: bool) -> Path:
    dest = (
        CACHE
        / f"gpu-machine-py{version}{'-cputorch' if torch else ''}-{_key('scripts/gpu_machine.txt')}"
    )
    cmd = [sys.executable, str(SCRIPTS / "gpu_bundle.py"), "emulate", "--python", python]
    cmd += ["--dest", str(dest)] + (["--torch", TORCH_CPU] if torch else [])
    _cached(
        dest,
        ".atroposlib-gpu-emulation-ok",
        cmd,
        f"a Python {version} stand-in for the GPU machine",
    )
    return dest / "bin" / "python"


def _bundle(version: str) -> Path:
    key = _key(
        "scripts/gpu_bundle.txt",
        "scripts/gpu_machine.txt",
        "scripts/gpu_bundle.py",
        "pyproject.toml",
    )
    dest = CACHE / f"gpu-bundle-py{version}-{key}"
    cmd = [sys.executable, str(SCRIPTS / "gpu_bundle.py"), "build", "--out", str(dest)]
    _cached(
        dest,
        "MANIFEST.json",
        cmd + ["--python-version", version],
        f"the Python {version} wheel bundle",
    )
    return dest


def _check(
    python: str, bundle: Optional[Path], site: Optional[Path], *args: str
) -> subprocess.CompletedProcess:
    env = child_env()
    env["PYTHON"] = python
    env.pop(
        "PYTHONPATH", None
    )  # the stand-in sees only its own packages, the bundle and the checkout
    env["ATROPOS_GPU_BUNDLE"] = str(bundle) if bundle else "/nonexistent-gpu-bundle"
    if site is not None:
        env["ATROPOS_GPU_SITE"] = str(site)
    return subprocess.run(
        ["bash", str(SCRIPTS / "gpu_check.sh"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=280,
        cwd=REPO,
    )


def _closest_to_312() -> tuple[str, str, str]:
    """(python, version, note): 3.12 as on the GPU machine, else the nearest one found."""
    for v in ("3.12", "3.13", "3.11", "3.14", "3.10"):
        exe = _python(v)
        if exe:
            note = "" if v == "3.12" else f" (no Python 3.12 here: used {v}, the closest found)"
            return exe, v, note
    pytest.skip("no Python 3.10-3.14 interpreter to build the GPU machine's stand-in with")


def _only_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    return lines[0]


# ----------------------------------------------------------------------------------------------
def test_refuses_with_one_line_without_cuda():
    """In the project's own environment (everything installed, no bundle): one line, exit 1."""
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    proc = _check(sys.executable, None, None)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [NO_CUDA]


def test_bootstrap_on_the_gpu_machines_python_without_torch(tmp_path):
    python, version, note = _closest_to_312()
    venv_python = _machine_venv(python, version, torch=False)
    bundle = _bundle(version)
    site = tmp_path / "site"
    proc = _check(str(venv_python), bundle, site)
    assert proc.returncode == 1, proc.stderr[-2000:] + note
    installed = _only_line(proc.stdout)
    assert installed.startswith(f"gpu_check: bundle installed into {site}: "), installed + note
    for name in ("pydantic 2", "pydantic_core", "fastapi", "uvicorn", "orjson", "openai"):
        assert name in installed, installed
    # past the install and the imports of run-api and the engine's server, stopped with one line
    assert _only_line(proc.stderr).startswith(
        f"gpu_check: error: torch is not installed for {venv_python}"
    ), proc.stderr + note
    # a second run reuses the installed bundle
    again = _check(str(venv_python), bundle, site)
    assert _only_line(again.stdout).startswith(f"gpu_check: bundle already installed in {site}")
    # without pip (the installer then unpacks the wheels itself) the compiled wheels import the same
    bare = tmp_path / "site-no-pip"
    inst = subprocess.run(
        [str(venv_python), str(SCRIPTS / "gpu_bundle.py"), "install", "--bundle", str(bundle)]
        + ["--site", str(bare), "--no-pip"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert inst.returncode == 0 and "(unpacked)" in inst.stdout, inst.stderr
    imp = subprocess.run(
        [
            str(venv_python),
            "-c",
            "import pydantic_core, orjson, jiter, fastapi, atroposlib.api.app",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**child_env(), "PYTHONPATH": f"{REPO}:{bare}"},
    )
    assert imp.returncode == 0, imp.stderr[-2000:]


@pytest.fixture(scope="module")
def cputorch_machine() -> tuple[Path, Path]:
    """A Python 3.11 stand-in with the CPU build of torch, and its bundle."""
    python = _python("3.11")
    if python is None:
        pytest.skip("no Python 3.11 here (the only version a CPU build of torch installs for)")
    return _machine_venv(python, "3.11", torch=True), _bundle("3.11")


def test_bootstrap_with_cpu_torch_stops_at_no_cuda_device(cputorch_machine, tmp_path):
    venv_python, bundle = cputorch_machine
    proc = _check(str(venv_python), bundle, tmp_path / "site")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert _only_line(proc.stdout).startswith("gpu_check: bundle installed into")
    assert proc.stderr.strip().splitlines() == [NO_CUDA]


def test_whole_check_runs_on_cpu_in_the_stand_in(cputorch_machine, tmp_path):
    """Both parts end to end with --device cpu (a smoke test of the script, not GPU figures), in the
    stand-in: the loop's run-api, engine, env and trainer processes find everything they import."""
    venv_python, bundle = cputorch_machine
    out = tmp_path / "report.json"
    proc = _check(
        str(venv_python), bundle, tmp_path / "site", "--device", "cpu", "--shapes", "tiny",
        "--tokens", "64", "--train-steps", "1", "--loop-steps", "3", "--budget-s", "240",
        "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    rows = report["train"]
    assert [(r["path"], r["status"]) for r in rows] == [("chunked", "ok"), ("full-vocab", "ok")]
    assert all(r["params"] > 9_000_000 and r["tokens_per_s"] > 0 for r in rows)  # vocab 151,936
    loop = report["loop"]
    assert loop["status"] == "ok" and loop["steps_done"] == 3, loop
    assert loop["engine_device"] == "cpu" and loop["engine_weights_version"] == 3
    assert loop["steps_per_s"] > 0 and loop["refresh_s"] >= 0 and loop["engine_reload_s"] > 0
    table = proc.stdout[proc.stdout.index("\ngpu_check ") :]
    assert "MFU = 6 x params x tokens/s / 790 TFLOP/s" in table
    assert re.search(r"^tiny +10M +64 chunked +[\d,]+ +[\d.]+% +-$", table, re.M), table
    assert re.search(r"^loop \(.*engine on cpu\): 3/3 steps, [\d.]+ steps/s", table, re.M), table
    assert report["transfer"]["status"].startswith("skipped: needs CUDA")
    assert "\nnccl transfer: skipped: needs CUDA" in table
    assert report["table"] in proc.stdout


def _fake_wheel(folder: Path, name: str, version: str, requires: list[str]) -> dict:
    import zipfile

    path = folder / f"{name}-{version}-py3-none-any.whl"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires) + "\nlong description\n"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}-{version}.dist-info/METADATA", meta)
        z.writestr(f"{name}/__init__.py", f"VERSION = {version!r}\n")
    return {"file": path.name, "name": name, "version": version}


def test_installer_picks_only_what_the_machine_lacks_or_has_too_old(tmp_path):
    """The installer's choice, on fake wheels: a package the machine has in a good enough version stays
    the machine's (what the bundle carries for it is not installed), one it lacks or has too old comes
    from the bundle, markers and extras are honoured, and a need nobody can meet is one clear error."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        import gpu_bundle
    finally:
        sys.path.remove(str(SCRIPTS))
    wheels = [
        _fake_wheel(
            tmp_path, "zzweb", "2.0", ["zzcore>=1.5", "zzhelper", "zzfancy; extra == 'all'"]
        ),
        _fake_wheel(tmp_path, "zzcore", "1.6", ["zztiny>=3", "zzold_py; python_version < '3.0'"]),
        _fake_wheel(tmp_path, "zzhelper", "1.0", []),
        _fake_wheel(tmp_path, "zztiny", "3.1", []),
    ]
    manifest = {"requires": ["zzweb>=1.0"], "wheels": wheels}

    def chosen(have: dict[str, str]) -> tuple[list[str], list[str]]:
        picked, kept = gpu_bundle.select(manifest, tmp_path, have)
        return sorted(w["name"] for w in picked), kept

    assert chosen({}) == (["zzcore", "zzhelper", "zztiny", "zzweb"], [])
    # the machine's zzhelper is fine, its zzcore is too old (and the new zzcore needs zztiny, which it has)
    assert chosen({"zzhelper": "0.1", "zzcore": "1.0", "zztiny": "3.0"}) == (
        ["zzcore", "zzweb"],
        ["zzhelper 0.1", "zztiny 3.0"],
    )
    assert chosen({"zzweb": "1.5", "zzcore": "1.5"}) == (
        [],
        ["zzweb 1.5"],
    )  # zzweb's own needs are its own
    manifest["requires"].append("zzabsent>=1")
    with pytest.raises(
        gpu_bundle.BundleError, match="zzabsent>=1 is needed .* the bundle has none"
    ):
        chosen({})
    # the installer itself (pip or not) then puts exactly the chosen ones into SITE
    manifest["requires"].pop()
    for w in wheels:
        w["sha256"] = gpu_bundle._sha256(tmp_path / w["file"])
    manifest["python_version"] = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (tmp_path / "MANIFEST.json").write_text(json.dumps(manifest))
    line = gpu_bundle.install(tmp_path, tmp_path / "site", use_pip=False)
    assert "4 wheels (unpacked)" in line
    assert sorted(
        p.name for p in (tmp_path / "site").iterdir() if not p.name.endswith("-info")
    ) == [
        ".atroposlib-bundle",
        "zzcore",
        "zzhelper",
        "zztiny",
        "zzweb",
    ]
    (tmp_path / wheels[0]["file"]).write_bytes(b"changed")
    (tmp_path / "site" / ".atroposlib-bundle").unlink()
    with pytest.raises(gpu_bundle.BundleError, match="does not match MANIFEST.json"):
        gpu_bundle.install(tmp_path, tmp_path / "site", use_pip=False)
