"""atroposlib.envkit.rollouts: draining the training buffers and eval metrics into one wandb_log dict."""

from types import SimpleNamespace

from atroposlib.envkit.rollouts import drain_metrics


def test_drain_metrics_means_buffers_adds_eval_metrics_and_empties_both():
    scores, passes = [1.0, 0.0, 0.5], []
    env = SimpleNamespace(eval_metrics=[("eval/percent_correct", 0.25)])
    metrics = drain_metrics(
        env, {"given": 1}, {"train/percent_correct": scores, "train/pass_rate": passes}
    )
    assert metrics == {"given": 1, "train/percent_correct": 0.5, "eval/percent_correct": 0.25}
    assert "train/pass_rate" not in metrics  # an empty buffer logs nothing (not a fake 0)
    assert scores == [] and env.eval_metrics == []
    assert drain_metrics(env, None, {"train/percent_correct": scores}) == {}
