"""Run mypy over atroposlib and example_trainer and hold the result to a baseline that only shrinks.

mypy's configuration (packages, the strict modules, the third-party packages left unanalysed) is in
pyproject.toml under ``[tool.mypy]``. The baseline, tests/typecheck-baseline.txt, lists the errors the
tree had when it was last written, one line per (file, error code, message) with a count, so it survives
line shifts. This script:

- fails naming each error that the baseline does not cover (a new one, or one more of a counted kind);
- fails on ANY error in a strict module (one whose mypy options enable ``disallow_untyped_defs``): the
  baseline never covers those;
- prints a line for each baseline entry that no longer occurs, so the baseline can shrink.

Usage (from anywhere):
    python scripts/typecheck.py                      # check
    python scripts/typecheck.py --update-baseline    # rewrite the baseline (refuses to grow it)
    python scripts/typecheck.py --update-baseline --allow-growth   # e.g. after files moved
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tests" / "typecheck-baseline.txt"
CONFIG = ROOT / "pyproject.toml"

# `path:line: error: message  [code]` (mypy's default output; a column may follow the line).
_ERROR = re.compile(
    r"^(?P<path>[^:\n]+\.pyi?):(?P<line>\d+)(?::\d+)?: error: (?P<msg>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$"
)
_LINE_REF = re.compile(r"\bline \d+\b")
_HEADER = (
    "# mypy errors allowed for now: count<TAB>file<TAB>code<TAB>message. It may only shrink.\n"
    "# Regenerate with `python scripts/typecheck.py --update-baseline` (see the README's Development section).\n"
)


@dataclass(frozen=True, order=True)
class Key:
    """What identifies an error across line shifts: its file, its code and its message."""

    path: str
    code: str
    message: str


@dataclass(frozen=True)
class Error:
    """One error of a mypy run, with its line for the report."""

    key: Key
    line: int

    def __str__(self) -> str:
        return f"{self.key.path}:{self.line}: [{self.key.code}] {self.key.message}"


@dataclass
class Comparison:
    """The result of holding a run to the baseline."""

    new: list[Error]  # errors beyond what the baseline allows (outside strict modules)
    strict: list[Error]  # errors in strict modules (never allowed)
    fixed: dict[Key, int]  # baseline entries with fewer occurrences now: key -> how many fewer

    @property
    def ok(self) -> bool:
        return not self.new and not self.strict


def parse_errors(output: str) -> tuple[list[Error], list[str]]:
    """mypy's output -> (errors, lines that look like errors but are not in the per-file form)."""
    errors: list[Error] = []
    odd: list[str] = []
    for raw in output.splitlines():
        m = _ERROR.match(raw.strip())
        if m is None:
            if ": error:" in raw:
                odd.append(raw)
            continue
        path = m["path"].replace("\\", "/")
        message = _LINE_REF.sub("line N", m["msg"].strip())
        errors.append(Error(Key(path, m["code"] or "misc", message), int(m["line"])))
    return errors, odd


def module_of(path: str) -> str:
    """`atroposlib/api/routes/ingest.py` -> `atroposlib.api.routes.ingest` (a package for __init__)."""
    parts = list(Path(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def strict_checker(config: Path = CONFIG) -> Callable[[str], bool]:
    """A predicate `module name -> strict?`, using mypy's own reading of the configuration."""
    from mypy.config_parser import parse_config_file
    from mypy.options import Options

    options = Options()
    parse_config_file(options, lambda: None, str(config), sys.stdout, sys.stderr)

    def is_strict(module: str) -> bool:
        return bool(options.clone_for_module(module).disallow_untyped_defs)

    return is_strict


def read_baseline(path: Path = BASELINE) -> Counter[Key]:
    counts: Counter[Key] = Counter()
    if not path.exists():
        return counts
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip() or raw.startswith("#"):
            continue
        fields = raw.split("\t", 3)
        if len(fields) != 4 or not fields[0].isdigit():
            raise SystemExit(f"{path}:{n}: malformed baseline line: {raw!r}")
        count, file, code, message = fields
        counts[Key(file, code, message)] += int(count)
    return counts


def format_baseline(counts: Counter[Key]) -> str:
    lines = [f"{n}\t{k.path}\t{k.code}\t{k.message}" for k, n in sorted(counts.items()) if n > 0]
    return _HEADER + "".join(line + "\n" for line in lines)


def compare(
    errors: Iterable[Error], baseline: Counter[Key], is_strict: Callable[[str], bool]
) -> Comparison:
    """Which errors the baseline does not cover, which are in strict modules, which entries went away."""
    by_key: dict[Key, list[Error]] = {}
    for e in errors:
        by_key.setdefault(e.key, []).append(e)
    new: list[Error] = []
    strict: list[Error] = []
    for key, found in by_key.items():
        if is_strict(module_of(key.path)):
            strict.extend(found)
            continue
        allowed = baseline.get(key, 0)
        if len(found) > allowed:
            # Which of several same-message errors is "the new one" cannot be told: name them all.
            new.extend(found)
    # entries that cover fewer errors than they count; one in a strict module covers none
    covered = {
        key: 0 if is_strict(module_of(key.path)) else len(by_key.get(key, [])) for key in baseline
    }
    fixed = {key: n - covered[key] for key, n in baseline.items() if covered[key] < n}
    return Comparison(sorted(new, key=str), sorted(strict, key=str), fixed)


def run_mypy() -> tuple[list[Error], str]:
    """Run mypy from the repository root with pyproject.toml's configuration."""
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(CONFIG), "--no-pretty"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    errors, odd = parse_errors(output)
    if proc.returncode not in (0, 1) or odd or (proc.returncode == 1 and not errors):
        raise SystemExit(f"mypy did not run cleanly (exit {proc.returncode}):\n{output}")
    return errors, output


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--update-baseline", action="store_true", help="rewrite the baseline file")
    ap.add_argument(
        "--allow-growth",
        action="store_true",
        help="with --update-baseline: accept new entries (e.g. after files moved)",
    )
    ap.add_argument("--baseline", type=Path, default=BASELINE, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    errors, _ = run_mypy()
    baseline = read_baseline(args.baseline)
    is_strict = strict_checker()
    result = compare(errors, baseline, is_strict)

    for e in result.strict:
        print(f"STRICT  {e}")
    if args.update_baseline:
        if result.strict:
            print(
                f"{len(result.strict)} error(s) in strict modules; fix them, the baseline never holds them."
            )
            return 1
        if result.new and not args.allow_growth:
            for e in result.new:
                print(f"NEW     {e}")
            print("The baseline would grow; fix these, or pass --allow-growth if files only moved.")
            return 1
        counts = Counter(e.key for e in errors if not is_strict(module_of(e.key.path)))
        args.baseline.write_text(format_baseline(counts), encoding="utf-8")
        print(
            f"baseline: {sum(baseline.values())} -> {sum(counts.values())} errors ({args.baseline.name})"
        )
        return 0

    for e in result.new:
        print(f"NEW     {e}")
    for key, n in sorted(result.fixed.items()):
        print(f"FIXED   {key.path}: [{key.code}] {key.message} (x{n})")
    if result.fixed:
        print(
            f"The baseline can shrink by {sum(result.fixed.values())}: "
            "run `python scripts/typecheck.py --update-baseline`."
        )
    if result.ok:
        print(
            f"typecheck: ok ({len(errors)} baselined error(s), {sum(baseline.values())} in baseline)"
        )
        return 0
    print(
        f"typecheck: {len(result.new)} error(s) not in the baseline, "
        f"{len(result.strict)} in strict modules"
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
