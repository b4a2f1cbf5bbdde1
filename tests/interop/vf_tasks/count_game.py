"""Multi-turn: the env's own ``run`` answers each reply with a count of its characters, for
``rounds`` turns; the task's rubric and the env's ``run`` both record rewards."""

import verifiers.v1 as vf


class CountConfig(vf.TasksetConfig):
    n: int = 2
    rounds: int = 3


class CountData(vf.TaskData):
    rounds: int


class CountTask(vf.Task[CountData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def chars(self, trace) -> float:
        replies = [(m.content or "").strip() for m in trace.assistant_messages]
        return sum((len(r) % 5) / 4 for r in replies)


class CountEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


def feedback(reply: str) -> str:
    return f"You said {len(reply)} characters. Again."


class CountEnv(vf.Env[CountEnvConfig]):
    async def run(self, task, agents):
        async with agents.player.interaction(task) as it:
            seg = await it.turn()
            for _ in range(task.data.rounds - 1):
                if seg.terminated:
                    break
                seg = await it.turn(feedback(seg.last_reply))
        it.trace.record_reward("turns_taken", float(it.trace.num_turns), 0.25)


class CountTaskset(vf.Taskset[CountTask, CountConfig]):
    def load(self):
        for i in range(self.config.n):
            data = CountData(prompt=f"Game {i}. Say something.", rounds=self.config.rounds)
            yield CountTask(data, self.config.task)


__all__ = ["CountEnv", "CountTaskset", "feedback"]
