"""Math with ``\\boxed{}`` answers, scored with math-verify (Atropos's ``math_server``).

Data: ``datasets.load_dataset("zwhe99/DeepMath-103K")`` (``question`` / ``final_answer``) when the hub is
reachable; offline (``--env.data_source procedural``, or ``auto`` without a hub) an even mix of
reasoning-gym's ``basic_arithmetic``, ``simple_equations``, ``fraction_simplification`` and ``chain_sum``,
whose gold answers math-verify can check. Any hub dataset works with ``--env.hub_path``,
``--env.question_field`` and ``--env.answer_field``.

Reward: +1 for an equivalent boxed answer, -1 otherwise, and Atropos's length penalty when a whole group
is right. A group whose gold answer math-verify cannot parse is skipped (never trained as 0).

    python environments/math_server.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2 --env.data_source procedural

Sampling, scoring and evaluation are those of every boxed-answer math env (this env subclasses
``atroposlib.envkit.math_env.MathAnswerEnv``, as ``gsm8k_server.py`` does); only the data
(``load_problems``), the config and the answer instruction (``answer_format``) differ, which is how a
variant env should be written.
"""

from pydantic import Field

from atroposlib.envkit.data_sources import DataSource, load_math
from atroposlib.envkit.math_env import MathAnswerEnv
from atroposlib.envkit.rollouts import SamplingConfig
from atroposlib.envkit.servers import local_defaults
from atroposlib.type_definitions import Item

ANSWER_FORMAT = "Solve the problem and put only your final answer in \\boxed{}."


class MathConfig(SamplingConfig):
    data_source: DataSource = Field(
        default="auto", description="auto (hub, else offline), hub or procedural."
    )
    hub_path: str = Field(
        default="zwhe99/DeepMath-103K", description="Hub dataset used when online."
    )
    question_field: str = Field(default="question", description="Hub column holding the problem.")
    answer_field: str = Field(
        default="final_answer", description="Hub column holding the final answer."
    )
    offline_size: int = Field(
        default=2000, ge=4, description="Procedural problems to generate per split."
    )
    eval_size: int = Field(default=64, ge=1, description="Problems used by evaluate().")


class MathEnv(MathAnswerEnv):
    name = "math"
    env_config_cls = MathConfig
    answer_format = ANSWER_FORMAT
    config_init = local_defaults(group_size=8, max_token_length=4096, batch_size=12)

    def load_problems(self) -> tuple[list[Item], list[Item]]:
        cfg = self.config

        def load(split: str, size: int) -> list[Item]:
            return load_math(
                cfg.data_source,
                split,
                size=size,
                hub_path=cfg.hub_path,
                question_field=cfg.question_field,
                answer_field=cfg.answer_field,
            ).rows

        return load("train", cfg.offline_size), load("test", max(cfg.eval_size, 4))[: cfg.eval_size]


if __name__ == "__main__":
    MathEnv.cli()
