"""Single-turn: "say a number" tasks; the rubric rewards the reply's length (so a test can recompute it)."""

import verifiers.v1 as vf


class EchoConfig(vf.TasksetConfig):
    n: int = 3
    word: str = "number"


class EchoData(vf.TaskData):
    answer: str


class EchoTask(vf.Task[EchoData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def length_score(self, trace) -> float:
        return (len(trace.last_reply) % 5) / 4

    @vf.reward(weight=0.5)
    async def has_answer(self, task, trace) -> float:
        return 1.0 if task.answer in trace.last_reply else 0.0

    @vf.metric
    async def reply_chars(self, trace) -> float:
        return float(len(trace.last_reply))


def expected_score(reply: str, answer: str) -> float:
    reply = reply.strip()
    return (len(reply) % 5) / 4 + 0.5 * (1.0 if answer in reply else 0.0)


class EchoTaskset(vf.Taskset[EchoTask, EchoConfig]):
    def load(self):
        for i in range(self.config.n):
            data = EchoData(
                prompt=f"Say the {self.config.word} {i}.", answer=str(i), system_prompt="Be brief."
            )
            yield EchoTask(data, self.config.task)


__all__ = ["EchoTaskset", "expected_score"]
