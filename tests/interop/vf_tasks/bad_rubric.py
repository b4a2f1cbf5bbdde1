"""A taskset whose rubric raises on every reply."""

import verifiers.v1 as vf


class BadTask(vf.Task[vf.TaskData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def broken(self, trace) -> float:
        raise ZeroDivisionError("the grader divided by zero")


class BadRubricTaskset(vf.Taskset[BadTask, vf.TasksetConfig]):
    def load(self):
        for i in range(2):
            yield BadTask(vf.TaskData(prompt=f"Task {i}."), self.config.task)


__all__ = ["BadRubricTaskset"]
