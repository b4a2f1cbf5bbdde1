"""Smaller trainer defects of issue 19, each shown by a test that failed before its fix:

* with ``kl_coef > 0`` the reference forward ran even when every sequence carried ``ref_logprobs``;
* a KL term with neither a reference model nor ``ref_logprobs`` crashed inside the loss;
* one sequence without inference logprobs made its whole micro-batch on-policy;
* with async reload the row of step N logged the previous push's ``weights_version`` as if it were N's;
* distillation ids outside the vocabulary crashed inside ``gather``.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch
from _trainer_helpers import scripted_groups

from atroposlib.errors import ConfigError, SchemaError
from example_trainer.batching import flatten_batch
from example_trainer.config import TrainingConfig
from example_trainer.distributed import DistInfo
from example_trainer.output_head import inspect_output_head
from example_trainer.train_step import train_step
from example_trainer.weight_refresh import ReloadRefresh

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def policy(tiny_model):
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    return AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)


def _step(policy, groups, cfg, ref_model=None):
    policy.zero_grad(set_to_none=True)
    flat = flatten_batch(groups, seq_len=cfg.seq_len)
    return train_step(policy, ref_model, flat, cfg, DistInfo(), CPU, pad_id=0)


def _logprobs(model, tokens: list[int]) -> torch.Tensor:
    """log pi(token_t | prefix) for t >= 1 by a plain forward."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([tokens])).logits[0, :-1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(tokens[1:])[:, None])[:, 0]


class _Counting(torch.nn.Module):
    """A reference model that counts its forwards (after the chunked head's set-up probe, as the
    trainer's ``load_reference`` does it)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.config = model.config
        self.calls = 0

    def get_output_embeddings(self):
        return self.model.get_output_embeddings()

    def forward(self, **kw):
        self.calls += 1
        return self.model(**kw)

    @classmethod
    def of(cls, model: torch.nn.Module) -> _Counting:
        ref = cls(copy.deepcopy(model))
        inspect_output_head(ref)
        ref.calls = 0
        return ref


def test_reference_forward_is_skipped_when_the_batch_carries_ref_logprobs(policy):
    groups = scripted_groups(2, seed=21)
    for g in groups:
        g["ref_logprobs"] = [[-4.0] * len(t) for t in g["tokens"]]
    cfg = TrainingConfig(model_name="m", seq_len=32, kl_coef=0.1, gradient_accumulation_steps=2)
    ref = _Counting.of(policy)
    with_ref = _step(policy, groups, cfg, ref_model=ref)
    assert ref.calls == 0  # every sequence carries ref_logprobs: no reference forward at all
    without_ref = _step(policy, groups, cfg)
    assert with_ref["kl"] > 0 and with_ref["kl"] == pytest.approx(without_ref["kl"], rel=1e-6)


def test_reference_is_per_sequence_when_only_some_carry_ref_logprobs(policy):
    carried, missing = scripted_groups(2, seed=22)
    carried["ref_logprobs"] = [[-4.0] * len(t) for t in carried["tokens"]]
    cfg = TrainingConfig(model_name="m", seq_len=32, kl_coef=1.0)  # one micro-batch: both groups
    ref = _Counting.of(policy)  # the reference equals the policy: its own KL is 0
    stats = _step(policy, [carried, missing], cfg, ref_model=ref)
    assert ref.calls == 1
    flat = flatten_batch([carried], seq_len=32)
    k3 = 0.0
    for s in flat.sequences:
        d = (-4.0 - _logprobs(policy, s.tokens))[torch.tensor(s.trained[1:])]
        k3 += float((torch.exp(d) - d - 1).sum())
    assert stats["kl"] == pytest.approx(k3 / stats["tokens"], rel=1e-4)


def test_kl_without_reference_or_ref_logprobs_is_one_clear_error(policy):
    groups = scripted_groups(2, seed=23)
    groups[0]["ref_logprobs"] = [[-4.0] * len(t) for t in groups[0]["tokens"]]
    cfg = TrainingConfig(model_name="m", seq_len=32, kl_coef=0.1)
    with pytest.raises(ConfigError) as e:
        _step(policy, groups, cfg)
    msg = str(e.value)
    assert "\n" not in msg and "no ref_logprobs and no reference model" in msg
    assert msg.startswith("kl_coef 0.1: sequence 4 ")  # the first one without them
    assert all(p.grad is None for p in policy.parameters())  # refused before any forward


def test_a_sequence_without_inference_logprobs_leaves_the_others_off_policy(policy):
    with_lps, without = scripted_groups(2, seed=24)
    del without["inference_logprobs"]
    cfg = TrainingConfig(model_name="m", seq_len=32, micro_batch_tokens=10**6)  # one micro-batch
    alone = _step(policy, [with_lps], cfg)
    mixed = _step(policy, [with_lps, without], cfg)
    # the group with logprobs keeps its ratio against them; the other is on-policy (ratio 1, delta 0)
    assert alone["abs_delta_sum"] > 1.0
    assert mixed["abs_delta_sum"] == pytest.approx(alone["abs_delta_sum"], rel=1e-5)
    assert mixed["on_policy_seqs"] == len(without["tokens"]) and alone["on_policy_seqs"] == 0
    n_without = sum(sum(m != -100 for m in row[1:]) for row in without["masks"])
    assert mixed["ratio_sum"] == pytest.approx(alone["ratio_sum"] + n_without, rel=1e-5)


def test_distillation_ids_outside_the_vocabulary_are_named(policy):
    groups = scripted_groups(1, seed=25)
    vocab = policy.get_output_embeddings().weight.shape[0]
    g = groups[0]
    g["distill_token_ids"] = [[[5, 6] for _ in t] for t in g["tokens"]]
    g["distill_logprobs"] = [[[-0.1, -2.4] for _ in t] for t in g["tokens"]]
    g["distill_token_ids"][1][3] = [5, vocab + 7]
    cfg = TrainingConfig(model_name="m", seq_len=32, distill_coef=0.5)
    with pytest.raises(SchemaError) as e:
        _step(policy, groups, cfg)
    msg = str(e.value)
    assert f"id {vocab + 7} at position 3" in msg and f"(size {vocab})" in msg
    assert msg.startswith("sequence 1: distill_token_ids")
    g["distill_token_ids"][1][3] = [5, vocab - 1]  # the largest valid id trains
    assert _step(policy, groups, cfg)["distill"] > 0


def test_token_ids_outside_the_vocabulary_are_named(policy):
    groups = scripted_groups(1, seed=26)
    vocab = policy.get_output_embeddings().weight.shape[0]
    groups[0]["tokens"][2][-1] = vocab
    with pytest.raises(SchemaError, match=f"sequence 2: token id {vocab} at position"):
        _step(policy, groups, TrainingConfig(model_name="m", seq_len=32))


class _Saves:
    """Enough of a model for ``save_model_folder``."""

    def save_pretrained(self, out: Path, **_: object) -> None:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "model.safetensors").write_bytes(b"")


class _ReportsTheStepItLoaded(BaseHTTPRequestHandler):
    """A real engine-shaped reload route on loopback: answers, after 0.2 s, the weights version of the
    step whose checkpoint folder it was given (``.../step_N``)."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(0.2)
        out = json.dumps(
            {"success": True, "weights_version": int(Path(body["model_path"]).name.split("_")[-1])}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def reload_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ReportsTheStepItLoaded)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("async_refresh", [True, False])
def test_logged_weights_version_belongs_to_the_step_it_names(
    tmp_path, reload_server, async_refresh
):
    cfg = TrainingConfig(
        model_name="m",
        save_path=str(tmp_path),
        weight_refresh="reload",
        inference_urls=[reload_server],
        inference_server="atropos",
        async_refresh=async_refresh,
    )
    refresh = ReloadRefresh(cfg)
    rows = [refresh.refresh(step, _Saves(), None) for step in (1, 2, 3)]
    refresh.close()
    for row in rows:
        if row["weights_version"] is not None:  # the server's report is about the step it names
            assert row["weights_version"] == row.get("weights_version_step", row["policy_version"])
    if async_refresh:  # each row: the newest push that had completed when it was written
        assert [r["weights_version_step"] for r in rows] == [None, 1, 2]
        assert rows[1]["reload_push_s"] >= 0.2
    else:
        assert [(r["weights_version"], r["weights_version_step"]) for r in rows] == [
            (1, 1),
            (2, 2),
            (3, 3),
        ]
