"""An Atropos-style stand-alone eval (``EvalBase`` + ``eval_runner``, like aime24_hermes_example).

``python aime_style_eval.py --server-url URL --model-name M`` asks each question with n samples and
reports pass@k; results go to ``eval_dir`` (metrics.json, samples.jsonl).
"""

import asyncio
import os

from atroposlib.envs.eval import EvalBase, eval_runner, pass_at_k
from atroposlib.envs.server_handling.server_manager import ServerManager


class TinyArithmeticEval(EvalBase):
    def setup_data(self):
        return [{"problem": f"What is {a}+{a}?", "answer": str(2 * a)} for a in range(1, 5)]

    async def run_item(self, server: ServerManager, data_item: dict) -> tuple[dict, list]:
        messages = [{"role": "user", "content": data_item["problem"]}]
        completion = await self.chat_completion(server, messages)
        rewards = [
            1.0 if data_item["answer"] in (c.message.content or "") else 0.0
            for c in completion.choices
        ]
        n = self.get_generation_params()["n"]
        key = f"pass@{self.pass_at_n}" + (f":{n}" if n != self.pass_at_n else "")
        return {key: pass_at_k(n, sum(rewards), self.pass_at_n)}, [
            {"messages": messages, "answer": c.message.content, "score": r}
            for c, r in zip(completion.choices, rewards, strict=True)
        ]


if __name__ == "__main__":
    asyncio.run(
        eval_runner(
            TinyArithmeticEval(
                pass_at_n=1,
                pass_at_n_samples=4,
                temperature=1.0,
                max_tokens=16,
                eval_dir=os.environ.get("EVAL_DIR"),
            )
        )
    )
