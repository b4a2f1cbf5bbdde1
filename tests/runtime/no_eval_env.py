"""An env file whose env has no ``evaluate()`` (it keeps ``BaseEnv``'s placeholder)."""

from atroposlib.envs.base import BaseEnv
from tests.envs.example_env import AdditionEnv


class NoEvalEnv(AdditionEnv):
    name = "no_eval_test"
    evaluate = BaseEnv.evaluate


if __name__ == "__main__":
    NoEvalEnv.cli()
