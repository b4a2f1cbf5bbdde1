"""A taskset whose ``load()`` fails (its data file is missing)."""

import verifiers.v1 as vf


class BadLoadTaskset(vf.Taskset[vf.Task, vf.TasksetConfig]):
    def load(self):
        with open("/nonexistent/tasks.jsonl") as f:
            yield from f


__all__ = ["BadLoadTaskset"]
