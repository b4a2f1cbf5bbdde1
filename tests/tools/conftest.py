"""Fixtures of the tools tests: a local tokenizer, groups files, headless Chromium driven by Playwright."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tools_helpers import write_jsonl

from atroposlib.viewer.samples import sample_groups

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory) -> Path:
    """A byte-level BPE tokenizer trained here and saved as a standard transformers folder."""
    from atroposlib.inference.tiny_model import build_tokenizer, default_corpus

    out = tmp_path_factory.mktemp("tokenizer")
    build_tokenizer(default_corpus(0, 400), vocab_size=384).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tokenizer(tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_dir))


@pytest.fixture
def groups_jsonl(tmp_path, tokenizer) -> Path:
    """The sample groups tokenized with the local tokenizer, one per line."""
    enc = lambda s: tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    return write_jsonl(tmp_path / "groups.jsonl", sample_groups(encode=enc))


# ----------------------------------------------------------------------------------------------
# Browser
# ----------------------------------------------------------------------------------------------
def _ensure_chromium() -> str:
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    if os.geteuid() != 0:
        pytest.skip(
            "Debian's chromium is not installed and the tests are not root to apt-get install it"
        )
    if shutil.which("apt-get") is None:
        pytest.skip("chromium is not installed and apt-get is not available to install it")
    cmd = "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium"
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=900)
    if r.returncode != 0 or not os.path.exists(CHROMIUM):
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
        pytest.skip(f"could not install chromium with apt-get (exit {r.returncode}): {tail[0]}")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory) -> Iterator:
    """A Playwright persistent context on the system Chromium, headless, fresh profile dir.

    Module-scoped: Playwright's sync API runs an event loop on the main thread until ``stop()``, and
    any later test that calls ``asyncio.run`` in the same session would fail while it is alive.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(
            "the playwright Python package is not installed (pip install 'atroposlib[dev]')"
        )
    exe = _ensure_chromium()
    profile = tmp_path_factory.mktemp("chromium-profile")
    pw = sync_playwright().start()
    try:
        ctx = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=exe,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 1100},
        )
    except Exception as e:  # noqa: BLE001 - a browser that cannot start is an environment problem
        pw.stop()
        pytest.skip(f"headless chromium did not start: {str(e).splitlines()[0]}")
    yield ctx
    ctx.close()
    pw.stop()


@pytest.fixture
def page(browser_context):
    pg = browser_context.new_page()
    pg.set_default_timeout(60_000)  # generous: the suite may run on two busy cores
    yield pg
    pg.close()


@pytest.fixture
def screenshot_dir(tmp_path) -> Path:
    """Where browser tests save screenshots: $ATROPOS_SCREENSHOT_DIR when set (docs), else tmp."""
    d = Path(os.environ.get("ATROPOS_SCREENSHOT_DIR") or tmp_path / "shots")
    d.mkdir(parents=True, exist_ok=True)
    return d
