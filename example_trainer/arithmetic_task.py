"""The demo's arithmetic task, re-exported from ``atroposlib.utils.arithmetic_task`` (shared with the env)."""

from atroposlib.utils.arithmetic_task import Problem, all_problems, make_problem, score_completion

__all__ = ["Problem", "all_problems", "make_problem", "score_completion"]
