"""The real server process driven by the real `openai` client (and httpx for the non-OpenAI endpoints)."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest
import torch

PROMPTS = [
    f"What is {a} + {b}?" for a, b in [(1, 2), (30, 4), (5, 67), (8, 9), (123, 4), (7, 7)]
] + [
    "Hello there",
    "Spell apple backward",
    "x",
]


def _greedy(client, prompt, **kw):
    return client.completions.create(
        model="tiny",
        prompt=prompt,
        max_tokens=kw.pop("max_tokens", 12),
        temperature=0.0,
        extra_body={"ignore_eos": True},
        **kw,
    )


def test_health_models_and_metrics(server, tiny_model_dir):
    h = httpx.get(server.url + "/health").json()
    assert h["status"] == "ok" and h["weights_version"] == 0
    assert h["model_path"] == str(tiny_model_dir.resolve())
    models = server.client().models.list()
    assert [m.id for m in models.data] == ["tiny"]
    text = httpx.get(server.url + "/metrics").text
    assert "atropos_inference_queue_depth" in text and "atropos_inference_batch_size_bucket" in text


def test_completion_n_logprobs_token_ids_and_usage(server, tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    r = server.client().completions.create(
        model="tiny",
        prompt="What is 2 + 3?",
        n=3,
        max_tokens=7,
        temperature=1.0,
        seed=5,
        logprobs=2,
        extra_body={"return_token_ids": True, "ignore_eos": True},
    )
    assert len(r.choices) == 3 and [c.index for c in r.choices] == [0, 1, 2]
    prompt_ids = tok("What is 2 + 3?")["input_ids"]
    for c in r.choices:
        extra = c.model_extra
        assert extra["prompt_token_ids"] == prompt_ids
        assert len(extra["token_ids"]) == 7 and c.finish_reason == "length"
        assert c.text == tok.decode(extra["token_ids"], skip_special_tokens=True)
        lp = c.logprobs
        assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 7
        assert all(1 <= len(alts) <= 2 for alts in lp.top_logprobs)
        assert all(x <= 0 for x in lp.token_logprobs)
    assert len({tuple(c.model_extra["token_ids"]) for c in r.choices}) > 1  # samples differ
    assert r.usage.prompt_tokens == len(prompt_ids) and r.usage.completion_tokens == 21
    again = server.client().completions.create(
        model="tiny",
        prompt="What is 2 + 3?",
        n=3,
        max_tokens=7,
        temperature=1.0,
        seed=5,
        extra_body={"return_token_ids": True, "ignore_eos": True},
    )
    assert [c.model_extra["token_ids"] for c in again.choices] == [
        c.model_extra["token_ids"] for c in r.choices
    ]


def test_token_id_prompts_equal_text_prompts(server, tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    c = server.client()
    by_text = _greedy(c, PROMPTS[1])
    by_ids = _greedy(c, tok(PROMPTS[1])["input_ids"])
    assert by_ids.choices[0].text == by_text.choices[0].text
    both = _greedy(c, [tok(PROMPTS[1])["input_ids"], tok(PROMPTS[2])["input_ids"]])
    assert [ch.text for ch in both.choices] == [
        by_text.choices[0].text,
        _greedy(c, PROMPTS[2]).choices[0].text,
    ]


def test_stop_strings_finish_with_stop_and_are_excluded(server):
    c = server.client()
    full = _greedy(c, PROMPTS[0], max_tokens=24).choices[0]
    assert full.finish_reason == "length"
    stop = full.text[8:11]
    cut = _greedy(c, PROMPTS[0], max_tokens=24, stop=[stop, "\u2603never"]).choices[0]
    assert cut.finish_reason == "stop"
    assert cut.text == full.text[: full.text.find(stop)]


def test_chat_uses_template_and_returns_logprobs(server, tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    msgs = [
        {"role": "system", "content": "Answer with a number."},
        {"role": "user", "content": "What is 3 + 4?"},
    ]
    r = server.client().chat.completions.create(
        model="tiny",
        messages=msgs,
        n=2,
        max_tokens=6,
        temperature=0.8,
        logprobs=True,
        top_logprobs=3,
        extra_body={"return_token_ids": True, "ignore_eos": True},
    )
    expected = tok(
        tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True),
        add_special_tokens=False,
    )["input_ids"]
    assert r.model_extra["prompt_token_ids"] == expected
    assert r.usage.prompt_tokens == len(expected) and len(r.choices) == 2
    for ch in r.choices:
        assert ch.message.role == "assistant"
        assert len(ch.logprobs.content) == 6 == len(ch.model_extra["token_ids"])
        assert all(len(e.top_logprobs) == 3 for e in ch.logprobs.content)
        assert all(e.top_logprobs[0].logprob >= e.logprob - 1e-6 for e in ch.logprobs.content)


def test_concurrent_requests_are_batched_and_each_gets_its_own_answer(server):
    c = server.client()
    alone = [_greedy(c, p).choices[0].text for p in PROMPTS]
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        together = list(pool.map(lambda p: _greedy(c, p).choices[0].text, PROMPTS))
    assert together == alone
    assert len(set(alone)) > 1
    metrics = httpx.get(server.url + "/metrics").text
    sizes = {}
    for line in metrics.splitlines():
        if line.startswith("atropos_inference_batch_size_bucket"):
            le = line.split('le="')[1].split('"')[0]
            sizes[le] = float(line.rsplit(" ", 1)[1])
    assert sizes["1.0"] < sizes["+Inf"]  # at least one batch held more than one row


def test_logprobs_match_a_plain_forward_pass(server, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    c = server.client()
    with ThreadPoolExecutor(4) as pool:  # concurrent, so the rows are left-padded inside one batch
        results = list(
            pool.map(
                lambda p: c.completions.create(
                    model="tiny",
                    prompt=p,
                    max_tokens=10,
                    temperature=1.0,
                    seed=3,
                    logprobs=0,
                    extra_body={"return_token_ids": True, "ignore_eos": True},
                ).choices[0],
                PROMPTS[:4] + ["x"],
            )
        )
    worst = 0.0
    for ch in results:
        prompt, comp = ch.model_extra["prompt_token_ids"], ch.model_extra["token_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([prompt + comp])).logits[0], dim=-1)
        ref = logp[len(prompt) - 1 : -1].gather(-1, torch.tensor(comp).unsqueeze(-1)).squeeze(-1)
        worst = max(worst, (ref - torch.tensor(ch.logprobs.token_logprobs)).abs().max().item())
    assert worst < 1e-4


@pytest.mark.parametrize(
    "body,param",
    [
        ({"prompt": "hi", "top_p": 2.0}, "top_p"),
        ({"prompt": "hi", "n": 0}, "n"),
        ({"prompt": "hi", "temperature": -1}, "temperature"),
        ({"prompt": "hi", "max_tokens": 0}, "max_tokens"),
        ({"prompt": "hi", "stream_options": {"include_usage": True}}, "stream_options"),
        ({"prompt": [999999]}, "prompt"),
        ({"prompt": []}, "prompt"),
        ({"prompt": ["ok", ""]}, "prompt"),
        ({"prompt": "word " * 600}, "prompt"),
        ({}, "prompt"),
    ],
)
def test_bad_completion_requests_get_400_naming_the_param(server, body, param):
    r = httpx.post(server.url + "/v1/completions", json={"model": "tiny", **body}, timeout=60)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and param in err["message"]


def test_bad_chat_request_and_openai_client_error_type(server):
    r = httpx.post(server.url + "/v1/chat/completions", json={"model": "tiny", "messages": []})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
    with pytest.raises(openai.BadRequestError, match="top_logprobs"):
        server.client().chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], top_logprobs=2, max_tokens=2
        )


def test_weight_reload_changes_outputs_and_bumps_version(
    serve_model, tiny_model_dir, tiny_model_dir_v2, tmp_path
):
    # this server also logs at INFO, to check what its log holds (below)
    srv = serve_model(
        tiny_model_dir,
        *("--served-model-name", "tiny", "--log-level", "info", "--activity-interval", "1"),
    )
    c = srv.client()
    before = [_greedy(c, p).choices[0].text for p in PROMPTS[:3]]
    bad = httpx.post(
        srv.url + "/update_weights_from_disk", json={"model_path": str(tmp_path / "missing")}
    )
    assert (
        bad.status_code == 400
        and bad.json()["success"] is False
        and "not found" in bad.json()["message"]
    )
    assert [_greedy(c, p).choices[0].text for p in PROMPTS[:3]] == before
    ok = httpx.post(
        srv.url + "/update_weights_from_disk",
        json={"model_path": str(tiny_model_dir_v2)},
        timeout=120,
    )
    assert ok.status_code == 200 and ok.json() == {
        "success": True,
        "message": ok.json()["message"],
        "weights_version": 1,
    }
    after = [_greedy(c, p).choices[0].text for p in PROMPTS[:3]]
    assert after != before
    h = httpx.get(srv.url + "/health").json()
    assert h["weights_version"] == 1 and h["model_path"] == str(tiny_model_dir_v2.resolve())
    # the log: a summary line per interval with requests, not an access line per request; no
    # library progress bar or deprecation warning
    deadline = time.monotonic() + 30
    while "weights v1" not in srv.log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    log = srv.log_path.read_text()
    summaries = [
        line for line in log.splitlines() if "engine: " in line and "requests in the" in line
    ]
    assert summaries and "/v1/completions 200:" in log and "weights v1" in summaries[-1], log
    assert '"POST /v1/completions HTTP/1.1" 200' not in log, log[-2000:]
    assert "FutureWarning" not in log and "Loading weights" not in log, log[-2000:]
    # the trainer labels each push with its step; every choice says which weights generated it
    labelled = httpx.post(
        srv.url + "/update_weights_from_disk",
        json={"model_path": str(tiny_model_dir), "weight_version": "12"},
        timeout=120,
    )
    assert labelled.json()["weights_version"] == 12
    assert httpx.get(srv.url + "/weight_info").json() == {"weight_version": "12"}
    stamped = _greedy(c, PROMPTS[0], max_tokens=4).choices[0].model_extra["weight_versions"]
    assert stamped == [{"version": "12", "start": 0, "end": 4}]
    chat = c.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2, temperature=0
    )
    assert chat.choices[0].model_extra["weight_versions"][0]["version"] == "12"
    assert httpx.post(srv.url + "/update_weight_version", json={"new_version": "13"}).json() == {
        "success": True,
        "new_version": "13",
    }
    assert httpx.get(srv.url + "/health").json()["weights_version"] == 13
    for bad_label in ("v2", "-1", ""):  # a label is a trainer step: digits only
        r = httpx.post(srv.url + "/update_weight_version", json={"new_version": bad_label})
        assert r.status_code == 400 and r.json()["error"]["param"] == "new_version"
        r = httpx.post(
            srv.url + "/update_weights_from_disk",
            json={"model_path": str(tiny_model_dir), "weight_version": bad_label},
        )
        assert r.status_code == 400 and r.json()["error"]["param"] == "weight_version"
    assert httpx.get(srv.url + "/weight_info").json() == {"weight_version": "13"}


def test_full_queue_answers_503(serve_model, tiny_model_dir):
    srv = serve_model(tiny_model_dir, "--max-queue", "1", "--max-batch-size", "1")

    def one(_):
        return httpx.post(
            srv.url + "/v1/completions",
            timeout=120,
            json={"prompt": "hi", "max_tokens": 200, "ignore_eos": True},
        ).status_code

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(one, range(8)))
    assert 503 in codes and 200 in codes
    metrics = httpx.get(srv.url + "/metrics").text
    assert "atropos_inference_rejected_total 0.0" not in metrics
    assert 'atropos_inference_requests_total{endpoint="/v1/completions",status="503"}' in metrics


def test_cli_bad_model_dir_is_one_line_exit_2(tmp_path):
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "missing", tmp_path / "empty"):
        p = subprocess.run(
            [sys.executable, "-m", "atroposlib.cli.serve_model", "--model", str(target)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 2
        assert p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr
        assert str(target) in p.stderr


def test_cli_port_in_use_is_one_line_before_the_model_loads(tiny_model_dir):
    import socket

    from tests.cli_checks import one_line_error, run_module

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_module(
            "atroposlib.cli.serve_model", "--model", str(tiny_model_dir), "--port", str(port)
        )
    line = one_line_error(proc, 2, f"cannot listen on 127.0.0.1:{port}", "pick another --port")
    assert line.startswith("atropos-serve-model: error:") and proc.stdout == ""


def test_cli_bad_log_level_is_one_line(tiny_model_dir):
    from tests.cli_checks import one_line_error, run_module

    proc = run_module(
        "atroposlib.cli.serve_model", "--model", str(tiny_model_dir), "--log-level", "loud"
    )
    one_line_error(proc, 2, "--log-level: must be one of critical, error", "(got 'loud')")


def test_cli_says_where_it_serves_and_ctrl_c_ends_it_cleanly(tiny_model_dir, tmp_path):
    import signal

    from atroposlib.utils.net import free_port, wait_for_http

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "atroposlib.cli.serve_model", "--model", str(tiny_model_dir)]
        + ["--port", str(port), "--torch-threads", "1", "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", timeout=120, proc=proc)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert out == f"atropos-serve-model: serving {tiny_model_dir} on http://127.0.0.1:{port}\n"
