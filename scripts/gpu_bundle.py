"""The wheel bundle that lets the GPU check run on a borrowed GPU machine with no internet.

That machine (docs/training.md) has torch, transformers, peft, accelerate, httpx and a few more, but not
pydantic, fastapi, uvicorn, orjson, tenacity or openai, and at most 64 MiB of files travel with a command.

``build`` (here, with PyPI reachable; ``scripts/build_gpu_bundle.sh`` calls it) downloads the pins of
``scripts/gpu_bundle.txt`` and everything they require as binary wheels for the target Python
(default 3.12, manylinux x86_64), leaves out what ``scripts/gpu_machine.txt`` says the machine has, and
writes ``MANIFEST.json`` (wheels, sha256, the ranges the project needs) beside them.

``install`` (there, offline; ``scripts/gpu_check.sh`` calls it with the machine's Python) checks the
manifest and the hashes, then installs with ``pip install --no-index --no-deps --target SITE`` (or, with no
pip, by unpacking the wheels) only the wheels whose package is missing there or too old for what the
bundle's packages require; the caller then puts SITE on PYTHONPATH. A second run with the same bundle and
Python does nothing. Prints one line; any failure is one line on stderr and exit 1.

``emulate`` builds a venv that holds only what the GPU machine holds (for the bootstrap test).

Standard library only, apart from ``packaging`` (a dependency of transformers) for the version checks.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CARRY_LIMIT_MIB = 64
PLATFORMS = ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64")
STAMP = ".atroposlib-bundle"


class BundleError(Exception):
    """One line for the user."""


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lines(path: Path, prefix: str = "") -> list[str]:
    out = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if prefix:
            if line.startswith(prefix):
                out.extend(line[len(prefix) :].split())
        elif line and not line.startswith("#"):
            out.append(line)
    return out


def machine_has() -> set[str]:
    names = {
        canon(re.split(r"[<>=!~\[ ;]", s, maxsplit=1)[0]) for s in _lines(HERE / "gpu_machine.txt")
    }
    return names | {"torch"}


def machine_lacks() -> list[str]:
    return _lines(HERE / "gpu_machine.txt", prefix="# missing:")


def _project_ranges() -> dict[str, str]:
    """pyproject.toml's core dependency strings by package name (e.g. ``pydantic>=2.6``)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: the pins alone then
        return {}
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    ranges = {}
    for d in deps:
        name = canon(re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0])
        ranges[name] = re.sub(r"\[[^\]]*\]", "", d)  # uvicorn[standard]>=x -> uvicorn>=x
    return ranges


def _wheel_meta(path: Path) -> tuple[str, str, list[str]]:
    """(name, version, Requires-Dist lines) from a wheel's METADATA."""
    with zipfile.ZipFile(path) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode("utf-8", "replace")
    head = text.split("\n\n", 1)[0]
    fields: dict[str, list[str]] = {}
    for line in head.splitlines():
        if ":" in line and not line.startswith((" ", "\t")):
            k, v = line.split(":", 1)
            fields.setdefault(k.strip(), []).append(v.strip())
    return fields["Name"][0], fields["Version"][0], fields.get("Requires-Dist", [])


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _git_rev() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# ----------------------------------------------------------------------------------------------
# build (here)
# ----------------------------------------------------------------------------------------------
def build(out: Path, python_version: str) -> dict:
    pins = _lines(HERE / "gpu_bundle.txt")
    ranges = _project_ranges()
    abi = "cp" + python_version.replace(".", "")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "-d", tmp, "--only-binary=:all:"]
        cmd += ["--python-version", python_version, "--implementation", "cp", "--abi", abi]
        for p in PLATFORMS:
            cmd += ["--platform", p]
        proc = subprocess.run(cmd + pins, capture_output=True, text=True)
        if proc.returncode != 0:
            errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("ERROR")]
            raise BundleError(f"pip download failed: {(errors or ['(no ERROR line)'])[-1]}")
        has = machine_has()
        wheels, left_out = [], []
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("*.whl"):
            old.unlink()
        for w in sorted(Path(tmp).glob("*.whl")):
            name, version, _ = _wheel_meta(w)
            if canon(name) in has:
                left_out.append(f"{name}=={version}")
                continue
            shutil.copy2(w, out / w.name)
            wheels.append(
                {
                    "file": w.name,
                    "name": name,
                    "version": version,
                    "sha256": _sha256(w),
                    "bytes": w.stat().st_size,
                }
            )
    top = [canon(re.split(r"[<>=!~\[ ;]", p, maxsplit=1)[0]) for p in pins]
    manifest = {
        "python_version": python_version,
        "platforms": list(PLATFORMS),
        "built_from": _git_rev(),
        # what the machine's own copy must satisfy to be used instead of the bundle's
        "requires": [ranges.get(n, n) for n in top],
        "wheels": wheels,
        "left_out_machine_has": left_out,
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(w["bytes"] for w in wheels)
    if total > CARRY_LIMIT_MIB * 2**20:
        raise BundleError(
            f"the bundle is {total / 2**20:.1f} MiB, over the {CARRY_LIMIT_MIB} MiB carry limit"
        )
    manifest["total_bytes"] = total
    return manifest


# ----------------------------------------------------------------------------------------------
# install (on the GPU machine)
# ----------------------------------------------------------------------------------------------
def _installed_versions(site: Path) -> dict[str, str]:
    """Distributions visible to this interpreter, leaving out SITE (what the machine itself has)."""
    from importlib import metadata

    site_r = str(site.resolve())
    paths = [p for p in sys.path if p and not str(Path(p).resolve()).startswith(site_r)]
    found: dict[str, str] = {}
    for dist in metadata.distributions(path=paths):
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canon(name), dist.version)
    return found


def select(manifest: dict, bundle: Path, have: dict[str, str]) -> tuple[list[dict], list[str]]:
    """The wheels to install: those a requirement needs and the machine cannot satisfy.

    Starts from the manifest's top-level ranges and follows the Requires-Dist of every wheel it picks
    (markers evaluated for this interpreter, extras off). Returns (wheels, what the machine satisfied)."""
    try:
        from packaging.requirements import Requirement
        from packaging.version import Version
    except ImportError:  # no way to compare versions: install everything
        return list(manifest["wheels"]), []
    by_name = {canon(w["name"]): w for w in manifest["wheels"]}
    chosen: dict[str, dict] = {}
    kept: set[str] = set()
    queue = list(manifest["requires"])
    while queue:
        req = Requirement(queue.pop(0))
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canon(req.name)
        if name in chosen:
            if not req.specifier.contains(Version(chosen[name]["version"]), prereleases=True):
                raise BundleError(
                    f"the bundle's {name} {chosen[name]['version']} does not satisfy {req}"
                )
            continue
        mine = have.get(name)
        if mine is not None and req.specifier.contains(mine, prereleases=True):
            kept.add(f"{name} {mine}")
            continue
        wheel = by_name.get(name)
        if wheel is None:
            raise BundleError(
                f"{req} is needed and this machine has {mine or 'no ' + name}; the bundle has none "
                "(add it to scripts/gpu_bundle.txt and rebuild)"
            )
        if not req.specifier.contains(Version(wheel["version"]), prereleases=True):
            raise BundleError(f"the bundle's {name} {wheel['version']} does not satisfy {req}")
        chosen[name] = wheel
        queue.extend(_wheel_meta(bundle / wheel["file"])[2])
    return list(chosen.values()), sorted(kept)


def _unpack(wheel: Path, site: Path) -> None:
    """Install a wheel by unpacking it (no pip): purelib/platlib go to SITE, scripts and headers nowhere."""
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            parts = member.split("/")
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                member_out = "/".join(parts[2:])
            else:
                member_out = member
            target = site / member_out
            if member.endswith("/"):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(member))


def install(bundle: Path, site: Path, use_pip: bool = True) -> str:
    mf = bundle / "MANIFEST.json"
    if not mf.is_file():
        raise BundleError(
            f"no bundle at {bundle} (no MANIFEST.json): build it with scripts/build_gpu_bundle.sh"
        )
    manifest = json.loads(mf.read_text())
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if manifest["python_version"] != here:
        raise BundleError(
            f"the bundle at {bundle} is for Python {manifest['python_version']}, this is {here} "
            f"({sys.executable}): rebuild it with scripts/build_gpu_bundle.sh --python-version {here}"
        )
    key = hashlib.sha256(mf.read_bytes() + sys.executable.encode()).hexdigest()[:16]
    stamp = site / STAMP
    if stamp.is_file() and stamp.read_text().split("\n")[0] == key:
        return (
            f"bundle already installed in {site} ({stamp.read_text().split(chr(10), 1)[1].strip()})"
        )
    for w in manifest["wheels"]:
        path = bundle / w["file"]
        if not path.is_file() or _sha256(path) != w["sha256"]:
            raise BundleError(
                f"{path} is missing or does not match MANIFEST.json: carry the whole folder"
            )
    wheels, kept = select(manifest, bundle, _installed_versions(site))
    if site.exists():
        shutil.rmtree(site)
    site.mkdir(parents=True)
    files = [str(bundle / w["file"]) for w in wheels]
    how = "unpacked"
    if files and use_pip and _has_pip():
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
        cmd += ["--no-compile", "--disable-pip-version-check", "--target", str(site), *files]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise BundleError(f"pip install from the bundle failed: {tail}")
        how = "pip --no-index"
    else:
        for f in files:
            _unpack(Path(f), site)
    names = ", ".join(f"{w['name']} {w['version']}" for w in wheels)
    summary = f"{len(wheels)} wheels ({how}): {names or 'none'}; the machine's own: {', '.join(kept) or 'none'}"
    stamp.write_text(f"{key}\n{summary}\n")
    return f"bundle installed into {site}: {summary}"


def _has_pip() -> bool:
    return (
        subprocess.run(
            [sys.executable, "-m", "pip", "--version"], capture_output=True, text=True
        ).returncode
        == 0
    )


# ----------------------------------------------------------------------------------------------
# emulate (here, for the bootstrap test)
# ----------------------------------------------------------------------------------------------
def emulate(python: str, dest: Path, torch_pin: str | None) -> str:
    """A venv at DEST holding only what the GPU machine holds (torch only if ``torch_pin``)."""
    ok = dest / ".atroposlib-gpu-emulation-ok"
    if ok.is_file():
        return f"{dest} ready"
    if dest.exists():
        shutil.rmtree(dest)
    subprocess.run([python, "-m", "venv", str(dest)], check=True, capture_output=True)
    py = str(dest / "bin" / "python")
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

    def pip(*args: str) -> None:
        proc = subprocess.run([py, "-m", "pip", *args], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("ERROR")]
            raise BundleError(
                f"pip {args[0]} {' '.join(args[1:3])} ... failed: {(errors or [proc.stderr[-300:]])[-1]}"
            )

    if torch_pin:  # first, so nothing else pulls a CUDA build
        pip("install", "-q", torch_pin)
    pkgs = _lines(HERE / "gpu_machine.txt")
    pip("install", "-q", *[p for p in pkgs if canon(p) not in ("peft", "accelerate")])
    # peft and accelerate require torch: without torch they come in without their dependencies
    pip("install", "-q", *([] if torch_pin else ["--no-deps"]), "peft", "accelerate")
    pip("uninstall", "-y", "-q", *machine_lacks())
    ok.write_text("ok\n")
    return f"{dest} built"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="download the bundle (here, with PyPI)")
    b.add_argument("--out", type=Path, default=REPO / "gpu-bundle")
    b.add_argument("--python-version", default="3.12")
    i = sub.add_parser("install", help="install the bundle (there, offline)")
    i.add_argument("--bundle", type=Path, default=REPO / "gpu-bundle")
    i.add_argument("--site", type=Path, default=REPO / ".gpu-site")
    i.add_argument("--no-pip", action="store_true", help="unpack the wheels instead of using pip")
    e = sub.add_parser("emulate", help="a venv holding only what the GPU machine holds")
    e.add_argument("--python", required=True)
    e.add_argument("--dest", type=Path, required=True)
    e.add_argument("--torch", default=None, help="e.g. torch==2.13.0 (a CPU build); default: none")
    args = p.parse_args(argv)
    try:
        if args.cmd == "build":
            m = build(args.out, args.python_version)
            print(
                f"build_gpu_bundle: {len(m['wheels'])} wheels, {m['total_bytes'] / 2**20:.2f} MiB "
                f"(limit {CARRY_LIMIT_MIB} MiB) for Python {m['python_version']} manylinux x86_64 in "
                f"{args.out}; left out (the GPU machine has them): "
                f"{', '.join(m['left_out_machine_has']) or 'none'}"
            )
        elif args.cmd == "install":
            print(
                f"gpu_check: {install(args.bundle, args.site, use_pip=not args.no_pip)}", flush=True
            )
        else:
            print(f"gpu_bundle: {emulate(args.python, args.dest, args.torch)}")
    except BundleError as e:
        print(f"gpu_check: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
