"""The env's ``vllm`` backend and the trainer's in-place refresh modes against a real vLLM server.

Two servers (the session's ``dev_vllm``, started together): ``plain`` (dev routes + atroposlib's worker
extension) for the backend and ``reload``, ``lora`` (also ``--enable-lora``) for ``lora``. Every refresh test keeps an
env sampling through the refreshes and demands zero failed rollouts and the new weights visible after each.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest
import torch

from atroposlib.inference_clients.backends.vllm import lora_loads_once
from atroposlib.inference_clients.weight_routes import load_lora_in_place
from example_trainer.config import TrainingConfig
from example_trainer.weight_refresh import LoraRefresh, ReloadRefresh

from .conftest import EnvSampler, forward_logprobs, greedy

PROMPT = [5, 60, 70, 80, 90, 100, 33, 44]
REFRESHES = 5
# vLLM start-ups take 30 s on a quiet 2-core machine and several minutes on a loaded one
pytestmark = pytest.mark.timeout(1200)


LONG = 512 - len(PROMPT)  # the whole rest of the tier's context (max_model_len 512)


def _wait_running(url: str, request: threading.Thread, timeout: float = 60.0) -> None:
    """Until vLLM's ``vllm:num_requests_running`` gauge counts a request; fail if the thread sending
    it has already ended (the request finished or failed first: the test would prove nothing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert request.is_alive(), "the long request ended before vLLM reported it running"
        for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
            if line.startswith("vllm:num_requests_running") and float(line.split()[-1]) >= 1:
                return
        time.sleep(0.005)
    raise AssertionError("vLLM never reported the long request running")


def _model(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def _close(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def test_env_vllm_backend_ids_and_logprobs_match_a_forward_pass(dev_vllm, tiny_model_dir):
    import asyncio

    from atroposlib.inference_clients.server_manager import ServerManager

    url = dev_vllm["plain"].url
    sampler = EnvSampler(url, str(tiny_model_dir), PROMPT)

    async def go():
        sm = ServerManager([sampler.config])
        try:
            return await sm.tokens_and_logprobs_completion(
                input_ids=PROMPT, n=4, max_tokens=16, temperature=1.0
            )
        finally:
            await sm.close()

    prompt, outs, lps, _ = asyncio.run(go())
    assert prompt == PROMPT and len(outs) == 4
    model = _model(tiny_model_dir)
    for out, lp in zip(outs, lps, strict=True):
        assert len(out) == len(lp) > 0
        assert _close(lp, forward_logprobs(model, PROMPT, out)) < 1e-4


def test_get_logprobs_prompt_scores_match_a_forward_pass(dev_vllm, tiny_model_dir):
    """Atropos's ``ServerManager.get_logprobs`` against a real vLLM: one row per prompt token, the
    prompt token itself among its top-k, with the logprob a forward pass gives it."""
    import asyncio

    from atroposlib.inference_clients.server_manager import ServerManager

    sampler = EnvSampler(dev_vllm["plain"].url, str(tiny_model_dir), PROMPT)

    async def go():
        sm = ServerManager([sampler.config])
        try:
            return await sm.get_logprobs(input_ids=PROMPT, top_k=3)
        finally:
            await sm.close()

    out = asyncio.run(go())
    assert out["prompt_tokens"] == PROMPT
    ids, lps = out["prompt_topk_token_ids"], out["prompt_topk_logprobs"]
    assert len(ids) == len(lps) == len(PROMPT) and ids[0] == []  # nothing precedes the first token
    expected = forward_logprobs(_model(tiny_model_dir), PROMPT[:1], PROMPT[1:])
    for pos, want in enumerate(expected, start=1):
        assert PROMPT[pos] in ids[pos], (pos, ids[pos])
        assert abs(lps[pos][ids[pos].index(PROMPT[pos])] - want) < 1e-4
        assert lps[pos] == sorted(lps[pos], reverse=True) or PROMPT[pos] == ids[pos][-1]


def test_chat_with_token_ids(dev_vllm, tiny_model_dir):
    import httpx
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    messages = [{"role": "user", "content": "What is 2 + 3?"}]
    body = {
        "model": str(tiny_model_dir),
        "messages": messages,
        "max_tokens": 8,
        "temperature": 0.0,
        "logprobs": True,
        "return_token_ids": True,
    }
    r = httpx.post(dev_vllm["plain"].url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    data = r.json()
    want_prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert data["prompt_token_ids"] == tok(want_prompt, add_special_tokens=False)["input_ids"]
    ch = data["choices"][0]
    lps = [c["logprob"] for c in ch["logprobs"]["content"]]
    assert len(ch["token_ids"]) == len(lps) > 0
    ref = forward_logprobs(_model(tiny_model_dir), data["prompt_token_ids"], ch["token_ids"])
    assert _close(lps, ref) < 1e-4
    bad = httpx.post(
        dev_vllm["plain"].url + "/v1/chat/completions",
        json={**body, "model": "no-such-model"},
        timeout=60,
    )
    assert bad.status_code == 404  # what our engine now answers too


def test_text_only_managed_server_against_vllm(dev_vllm, tiny_model_dir, monkeypatch):
    """Atropos's managed server over a text-only OpenAI endpoint (server_type openai), served by a
    real vLLM: the nodes' tokens are the chat template's prompt plus the re-tokenised reply."""
    import asyncio

    from transformers import AutoTokenizer

    from atroposlib.inference_clients.config import APIServerConfig
    from atroposlib.inference_clients.server_manager import ServerManager

    monkeypatch.setenv("ATROPOS_ALLOW_DUMMY_MANAGED_SERVER", "1")
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    messages = [{"role": "user", "content": "What is 2 + 3?"}]
    prompt_ids = tok(
        tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
        add_special_tokens=False,
    )["input_ids"]
    cfg = APIServerConfig(
        base_url=dev_vllm["plain"].url + "/v1",
        model_name=str(tiny_model_dir),
        api_key="x",
        server_type="openai",
    )

    async def go():
        sm = ServerManager([cfg])
        try:
            async with sm.managed_server(tokenizer=tok) as managed:
                out = await managed.chat_completion(messages=messages, n=2, max_tokens=8)
                return out, managed.get_state()["nodes"]
        finally:
            await sm.close()

    out, nodes = asyncio.run(go())
    assert len(out.choices) == len(nodes) == 2
    for choice, node in zip(out.choices, nodes, strict=True):
        assert node.tokens[: len(prompt_ids)] == prompt_ids
        reply = node.tokens[len(prompt_ids) :]
        assert reply and tok.decode(reply) == choice.message.content
        assert node.masked_tokens == [-100] * len(prompt_ids) + reply


def _cfg(tmp_path, mode: str, url: str, **kw) -> TrainingConfig:
    return TrainingConfig(
        model_name="m",
        save_path=str(tmp_path / mode),
        weight_refresh=mode,
        inference_urls=[url],
        async_refresh=False,
        **kw,
    )


def test_reload_mode_refreshes_vllm_in_place(dev_vllm, tiny_model_dir, tmp_path):
    """Five in-place reloads while an env samples; each time the server's greedy ids and logprobs are
    those of the trainer's weights; at the end, reloading the start weights (as ``--resume`` does)
    gives exactly what a fresh server on them gives."""
    from transformers import AutoTokenizer

    url, fresh = dev_vllm["plain"].url, dev_vllm["lora"].url
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = _model(tiny_model_dir)
    strategy = ReloadRefresh(_cfg(tmp_path, "reload", url))
    times = []
    with EnvSampler(url, str(tiny_model_dir), PROMPT) as env:
        for step in range(1, REFRESHES + 1):
            torch.manual_seed(step)
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(torch.randn_like(p) * 0.02)
            before = env.rollouts
            t0 = time.perf_counter()
            strategy.refresh(step, model, tok)
            times.append(time.perf_counter() - t0)
            ids, lps = greedy(url, PROMPT)
            ref = forward_logprobs(model, PROMPT, ids)
            assert _close(lps, ref) < 1e-4, f"step {step}: served logprobs are not the new weights"
            assert ids == greedy_forward(model, PROMPT, len(ids))
            deadline = time.monotonic() + 60
            while env.rollouts == before and time.monotonic() < deadline:
                time.sleep(0.1)  # the env kept sampling across this refresh
            assert env.rollouts > before
    assert strategy._kinds == {url: "vllm"}  # found by probing
    assert not env.failures, env.failures[:3]
    print(f"vLLM in-place reload: {[round(t, 3) for t in times]} s per refresh (save + push)")

    resumed = ReloadRefresh(_cfg(tmp_path, "reload", url, resume=True))
    resumed.start(str(tiny_model_dir))  # a resumed run pushes its checkpoint before sampling
    resumed.close()
    strategy.close()
    ids, lps = greedy(url, PROMPT)
    fresh_ids, fresh_lps = greedy(fresh, PROMPT)  # a server that has only ever had these weights
    assert ids == fresh_ids and _close(lps, fresh_lps) < 1e-4


def greedy_forward(model, prompt: list[int], n: int) -> list[int]:
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt) :]


@pytest.mark.parametrize("async_load", [False, True])
def test_lora_mode_publishes_at_start_and_replaces_in_place(
    dev_vllm, tiny_model_dir, tmp_path, async_load
):
    """The adapter name exists before the first rollout and never 404s across five refreshes; after
    each (asynchronous: once its load has landed) the served logprobs are the trainer's adapter's; a
    resumed run republishes its adapter."""
    from example_trainer.checkpoint import save_model_folder

    url = dev_vllm["lora"].url
    cfg = _cfg(tmp_path, "lora", url, lora_rank=4, lora_alpha=8).model_copy(
        update={"async_lora_load": async_load}
    )
    strategy = LoraRefresh(cfg)
    model = strategy.prepare_model(_model(tiny_model_dir))
    strategy.start(str(tiny_model_dir))
    with EnvSampler(url, cfg.lora_adapter_name, PROMPT) as env:
        for step in range(1, REFRESHES + 1):
            torch.manual_seed(100 + step)
            with torch.no_grad():
                for n, p in model.named_parameters():
                    if "lora_B" in n:
                        p.copy_(torch.randn_like(p) * 0.3)
            before = env.rollouts
            row = strategy.refresh(step, model, None)
            assert row["weights_version_step"] == (step - 1 if async_load else step)
            strategy.wait_published()
            ids, lps = greedy(url, PROMPT, model=cfg.lora_adapter_name)
            assert _close(lps, forward_logprobs(model, PROMPT, ids)) < 1e-4, f"step {step}"
            deadline = time.monotonic() + 60
            while env.rollouts == before and time.monotonic() < deadline:
                time.sleep(0.1)
            assert env.rollouts > before
    strategy.close()
    assert strategy._kinds == {url: "vllm"}
    assert not env.failures, env.failures[:3]

    trained = save_model_folder(model, None, tmp_path / "ckpt")
    with torch.no_grad():  # the server drifts away from the checkpoint (a later, lost step)
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.zero_()
    strategy = LoraRefresh(cfg)
    strategy.refresh(REFRESHES + 1, model, None)
    strategy.wait_published()
    resumed = LoraRefresh(cfg)
    resumed_model = resumed.prepare_model(_model(tiny_model_dir), resume_from=str(trained))
    resumed.start(str(trained))
    ids, lps = greedy(url, PROMPT, model=cfg.lora_adapter_name)
    assert _close(lps, forward_logprobs(resumed_model, PROMPT, ids)) < 1e-4
    strategy.close()
    resumed.close()


def test_an_in_place_lora_load_reads_the_adapter_once(dev_vllm, tiny_model_dir, tmp_path):
    """vLLM keeps ``load_inplace`` on the adapter it serves and, without atroposlib's worker
    extension, re-reads the adapter's folder at every model step (vLLM issue 33791). With it, changing
    the files after the load does not change what is served: the adapter is the one that was loaded."""
    from example_trainer.checkpoint import save_model_folder

    url = dev_vllm["lora"].url
    strategy = LoraRefresh(_cfg(tmp_path, "lora", url, lora_rank=4, lora_alpha=8))
    model = strategy.prepare_model(_model(tiny_model_dir))
    torch.manual_seed(7)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn_like(p) * 0.3)
    folder = save_model_folder(model, None, tmp_path / "read-once")
    with httpx.Client(timeout=120) as http:
        assert lora_loads_once(http, url)
        load_lora_in_place(http, url, "read-once", str(folder))
    ids, lps = greedy(url, PROMPT, model="read-once")
    assert _close(lps, forward_logprobs(model, PROMPT, ids)) < 1e-4

    with torch.no_grad():  # the same folder now holds an adapter that does nothing
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.zero_()
    save_model_folder(model, None, folder)
    base_lps = forward_logprobs(model, PROMPT, ids)
    assert _close(lps, base_lps) > 1e-2  # the two adapters serve measurably different logprobs
    again_ids, again_lps = greedy(url, PROMPT, model="read-once")
    assert again_ids == ids and _close(again_lps, lps) < 1e-4, "the adapter was re-read from disk"
    strategy.close()


def test_a_request_in_flight_survives_a_reload_and_says_both_versions(
    dev_vllm, tiny_model_dir, tmp_path
):
    """The reload pauses with mode=keep: a long request is frozen, not waited for, then resumed from
    the tokens it had (recomputed with the new weights); the client brackets it with vLLM's
    /weight_info, so its tokens carry both the version before and the one after the refresh."""
    import asyncio

    from transformers import AutoTokenizer

    from atroposlib.inference_clients.config import APIServerConfig
    from atroposlib.inference_clients.server_manager import ServerManager

    url = dev_vllm["plain"].url
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = _model(tiny_model_dir)
    strategy = ReloadRefresh(_cfg(tmp_path, "reload", url))
    strategy.refresh(40, model, tok)  # the server holds weights labelled 40
    out: dict = {}
    started = threading.Event()

    async def sample() -> None:
        sm = ServerManager(
            [APIServerConfig(base_url=url, server_type="vllm", model_name=str(tiny_model_dir))]
        )
        try:
            first = await sm.tokens_and_logprobs_completion(input_ids=PROMPT, max_tokens=2)
            out["first"] = first.versions
            started.set()
            out["long"] = await sm.tokens_and_logprobs_completion(
                input_ids=PROMPT, max_tokens=LONG, temperature=1.0, ignore_eos=True
            )
        finally:
            await sm.close()

    thread = threading.Thread(target=lambda: asyncio.run(sample()))
    thread.start()
    try:
        assert started.wait(120)
        # refresh while the long request is generating: vLLM's own gauge says when it runs (a fixed
        # sleep lost the race on a quiet machine, where 400 tokens of the tiny model take under 1 s)
        _wait_running(url, thread)
        t0 = time.perf_counter()
        strategy.refresh(41, model, tok)
        refresh_s = time.perf_counter() - t0
    finally:  # the shared server is left with nothing in flight for the next test
        thread.join(300)
        strategy.close()
    _, outs, lps, _ = out["long"]
    assert out["first"] == [(40, 40)]
    assert len(outs[0]) == LONG and len(lps[0]) == LONG  # nothing lost across the refresh
    assert out["long"].versions == [(40, 41)], out["long"].versions
    assert httpx.get(url + "/weight_info").json() == {"weight_version": "41"}
    print(f"vLLM keep-mode reload with a request in flight: {refresh_s:.2f} s")
