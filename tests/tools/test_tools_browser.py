"""The report and view-run in a real headless Chromium: rendered DOM, escaping, filters, refresh."""

from __future__ import annotations

import base64
import io
import os
import signal
import subprocess
import sys

import pytest

from atroposlib.api.client import TrajectoryClient
from atroposlib.report.html import write_html_report
from atroposlib.utils.net import free_port, wait_for_http
from atroposlib.viewer.samples import make_group, sample_groups

pytestmark = pytest.mark.browser


def png_base64(colour: str = "red") -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (12, 12), colour).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


HOSTILE_SHOWN = "The answer is 12 <script>window.__pwned = 1; document.title = 'pwned'</script>"


def record_requests(page) -> list[str]:
    urls: list[str] = []
    page.on("request", lambda req: urls.append(req.url))
    return urls


def assert_all_local(urls: list[str]) -> None:
    remote = [
        u for u in urls if not u.startswith(("http://127.0.0.1", "file://", "data:", "blob:"))
    ]
    assert urls and not remote, remote


def assert_not_pwned(page, title: str) -> None:
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.title() == title


def test_the_pwned_probe_detects_live_markup(page):
    """Positive control: the same probe does see a script and an onerror handler that do run."""
    page.set_content("<title>x</title><script>window.__pwned = 1</script>")
    assert page.evaluate("window.__pwned") == 1
    page.set_content('<img src="data:," onerror="window.__pwned = 2">')
    page.wait_for_function("window.__pwned === 2", timeout=5000)


def test_html_report_in_chromium(page, tmp_path, screenshot_dir):
    title = "Rollouts - arithmetic"
    groups = sample_groups()
    groups[0]["images"] = [png_base64()]  # multimodal: inline images are shown, never fetched
    path = write_html_report(groups, tmp_path / "report.html", title=title)
    urls = record_requests(page)
    page.goto(path.as_uri())
    page.wait_for_selector("details.group")
    assert_not_pwned(page, title)
    assert page.locator("details.group").count() == 4
    assert page.locator("img.mm").evaluate_all("els => els.map(e => e.naturalWidth)") == [12]
    body = page.text_content("body")
    assert HOSTILE_SHOWN in body and "nine (9)" in body and "score 1" in body
    assert page.locator("script").count() == 1 and page.locator("main img").count() == 1
    assert page.inner_text("#shown") == "4 of 4 groups shown"  # our own script did run
    page.fill("#q", "nine")
    assert page.locator("details.group:not(.hidden)").count() == 1
    assert page.inner_text("#shown") == "1 of 4 groups shown"
    page.fill("#q", "")
    page.select_option("#env", "arithmetic_hard")
    assert page.locator("details.group:not(.hidden)").count() == 1
    page.select_option("#env", "")
    page.screenshot(path=str(screenshot_dir / "tools-report.png"))
    assert_not_pwned(page, title)
    assert_all_local(urls)  # self-contained: no CDN, no remote font or image


def test_model_text_reads_as_written_in_chromium(page, tmp_path):
    """A '>' at a line start, leading spaces and markdown marks are shown as the model wrote them."""
    text = "> quoted line\n   three spaces\n**not bold**\n\tand a tab"
    g = make_group("Quote me", "x", [text], env_name="quotes")
    path = write_html_report([g], tmp_path / "text.html", title="text")
    page.goto(path.as_uri())
    shown = page.locator(".seq .msg.role-assistant pre.text").inner_text()
    assert shown == text
    assert page.locator("blockquote, strong").count() == 0


@pytest.fixture
def view_run(tmp_path):
    """Start `view-run` with the given args on a free port; yields a starter, stops it at teardown."""
    procs = []

    def start(*args: str) -> str:
        port = free_port()
        log = open(tmp_path / f"view-run-{port}.log", "wb")
        env = dict(os.environ, GRADIO_ANALYTICS_ENABLED="False")
        proc = subprocess.Popen(
            [sys.executable, "-m", "atroposlib.cli.view_run", "--port", str(port), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        procs.append(proc)
        url = f"http://127.0.0.1:{port}/"
        try:
            wait_for_http(url, timeout=120, proc=proc)
        except (TimeoutError, RuntimeError):
            log.flush()
            raise AssertionError(
                (tmp_path / f"view-run-{port}.log").read_text(errors="replace")
            ) from None
        return url

    yield start
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


def shown_groups(page) -> int:
    return page.locator("#atv-root details.group").count()


def test_view_run_reads_a_live_api_in_chromium(
    page, run_api, view_run, tokenizer, tokenizer_dir, screenshot_dir
):
    api = run_api("--store", "memory", "--api-token", "tok")
    client = TrajectoryClient(api.url, token="tok")
    enc = lambda s: tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    for g in sample_groups(encode=enc):
        client.post_scored_data(g)
    url = view_run("--api-url", api.url, "--api-token", "tok", "--tokenizer", str(tokenizer_dir))

    urls = record_requests(page)
    page.goto(url)
    page.wait_for_selector("#atv-root details.group", timeout=60_000)
    assert_not_pwned(page, "Atropos run viewer")
    assert shown_groups(page) == 4
    root = page.text_content("#atv-root")
    assert (
        "nine (9)" in root
        and "score 1" in root
        and "policy v1" in root
        and "arithmetic_hard" in root
    )
    assert (
        page.locator("#atv-root script").count() == 0 and page.locator("#atv-root img").count() == 0
    )
    # token view of the newest group's first completion ("16"), decoded with the local tokenizer
    first = page.locator("#atv-root .seq").first
    tokens = first.locator(".tok-trained")
    assert "16" in "".join(tokens.all_inner_texts())
    assert "logprob" in tokens.first.get_attribute("title")
    assert "advantage" in tokens.first.get_attribute("title")
    assert first.locator(".tok-masked").count() == 0  # only the completion is shown, not the prompt
    # reading changed nothing in the run
    st = client.status()
    assert (st.queue_size, st.current_step) == (4, 0) and client.info().batch_size == -1

    # a new group shows up on refresh
    fresh = make_group("What is 2 + 2?", "4", ["4 fresh-group-marker", "5"], encode=enc)
    fresh["images"] = [f"data:image/png;base64,{png_base64('blue')}"]
    client.post_scored_data(fresh)
    page.click("#atv-refresh")
    page.wait_for_function(
        "document.querySelectorAll('#atv-root details.group').length === 5", timeout=30_000
    )
    assert "fresh-group-marker" in page.text_content("#atv-root")
    page.wait_for_function(
        "document.querySelector('#atv-root img.mm').naturalWidth === 12", timeout=10_000
    )

    # score filter: groups whose mean score is at least 0.4 (sample 0 at 0.5; the new one at 0.0)
    box = page.locator("#atv-min textarea, #atv-min input").first
    box.fill("0.4")
    box.press("Enter")
    page.wait_for_function(
        "document.querySelectorAll('#atv-root details.group').length === 1", timeout=30_000
    )
    assert "What is 7 + 5?" in page.text_content("#atv-root")
    box.fill("")
    box.press("Enter")
    page.wait_for_function(
        "document.querySelectorAll('#atv-root details.group').length === 5", timeout=30_000
    )
    page.wait_for_timeout(300)
    page.screenshot(path=str(screenshot_dir / "tools-view-run.png"))
    # the oldest group holds the hostile completion: shown as text, its tokens coloured, nothing ran
    oldest = page.locator("#atv-root details.group").last
    oldest.locator("> summary").click()
    hostile = oldest.locator(".seq").nth(3)
    hostile.locator(".tok-trained").first.wait_for(state="visible")
    assert HOSTILE_SHOWN in hostile.inner_text()
    hostile.screenshot(path=str(screenshot_dir / "tools-view-run-tokens.png"))
    assert_not_pwned(page, "Atropos run viewer")
    st = client.status()
    assert (st.queue_size, st.current_step) == (5, 0)
    assert_all_local(urls)  # the page loads nothing from the internet (fonts, CDN, analytics)
