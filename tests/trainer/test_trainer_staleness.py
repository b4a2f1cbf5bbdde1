"""How stale the trained data was, per sequence and from the servers' reports; what run-api dropped
for age, in the step metrics; the one-line summary per interval; the warning when the bound cannot
hold the trainer's refresh interval."""

from __future__ import annotations

import logging

from atroposlib.api.client import TrajectoryClient
from atroposlib.type_definitions import Registration
from example_trainer.batching import flatten_batch
from example_trainer.config import TrainingConfig
from example_trainer.metrics import lag_metrics, wandb_row
from example_trainer.staleness import StalenessReport, weights_lag


def _group(**extra):
    g = {
        "tokens": [[5, 6, 7], [5, 6, 8]],
        "masks": [[-100, 6, 7], [-100, 6, 8]],
        "scores": [1.0, 0.0],
    }
    g.update(extra)
    return g


def test_lag_is_per_sequence_from_the_oldest_weights_the_server_reported():
    flat = flatten_batch(
        [
            _group(policy_version=3, weights_versions=[[3, 4], [5, 5]]),  # a refresh mid-way
            _group(policy_version=2),  # the server said nothing: the env's estimate
            {**_group(), "reward_status": "unavailable", "policy_version": 0},  # not trained
        ],
        seq_len=8,
    )
    m = lag_metrics(7, flat)  # step 7 trains weights 6
    assert m["policy_lag_hist"] == {"1": 1, "3": 1, "4": 2}
    assert m["policy_lag"] == (3 + 1 + 4 + 4) / 4 and m["policy_lag_max"] == 4
    assert m["server_versioned_sequences"] == 2
    row = wandb_row({"step": 7, **m, "note": "text"})
    assert row["train/policy_lag_hist/4"] == 2 and "train/note" not in row
    assert lag_metrics(1, flatten_batch([_group()], seq_len=8))["policy_lag"] is None


def test_the_trainer_registers_how_far_its_servers_can_trail():
    base = {"model_name": "m", "vllm_restart_interval": 3}
    assert weights_lag(TrainingConfig(**base, weight_refresh="restart")) == 2
    assert weights_lag(TrainingConfig(**base, weight_refresh="reload")) == 3  # async push
    assert weights_lag(TrainingConfig(**base, weight_refresh="reload", async_refresh=False)) == 2
    assert weights_lag(TrainingConfig(**base, weight_refresh="lora")) == 2  # loaded in the step
    assert weights_lag(TrainingConfig(**base, weight_refresh="lora", async_lora_load=True)) == 3


def test_stale_drops_reach_the_step_metrics_and_the_interval_line(run_api, caplog):
    api = run_api("--store", "memory", "--max-staleness", "1")
    cfg = TrainingConfig(
        model_name="m",
        api_url=api.url,
        weight_refresh="reload",
        vllm_restart_interval=1,
        summary_interval=2,
    )
    with TrajectoryClient(api.url) as client:
        client.register(Registration(batch_size=2, max_token_len=16, starting_step=5))
        with caplog.at_level(logging.WARNING, logger="atropos-grpo"):
            report = StalenessReport(client, cfg)
        # bound 1 < weights lag 1 (async push) + 1: said at start, once
        (warning,) = [r.getMessage() for r in caplog.records if "healthy groups" in r.getMessage()]
        assert "--max-staleness to at least 2" in warning
        assert client.get_batch().batch is None  # the trainer has started
        client.post_scored_data(_group(policy_version=1))  # 5 - 1 > 1: dropped for age
        client.post_scored_data(_group(policy_version=5))
        assert client.get_batch().batch is not None
        lag = {"policy_lag": 0.5, "policy_lag_max": 1}
        first = report.step_metrics(7, lag)
        assert first == {"stale_dropped_groups": 1, "stale_dropped_total": 1}
        with caplog.at_level(logging.INFO, logger="atropos-grpo"):
            second = report.step_metrics(8, lag)
        assert second == {"stale_dropped_groups": 0, "stale_dropped_total": 1}
        (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("staleness")]
        assert line == (
            "staleness, steps 7-8: policy lag mean 0.50, max 1 (bound 1); 1 group(s) dropped for "
            "age (1 in the run)"
        )
