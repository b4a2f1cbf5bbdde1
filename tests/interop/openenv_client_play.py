"""Plays episodes of an OpenEnv server with openenv's own client (runs in openenv's venv).

    python openenv_client_play.py URL POLICY EPISODES [URL POLICY EPISODES ...]

POLICY ``arithmetic`` answers "a+b=" prompts with the sum; ``tools`` makes one calculator tool call,
then answers 0. Prints one JSON list: per episode its steps (observation prompt, message roles,
reply), the final reward, done and metadata; one list per URL.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from typing import Any

from openenv.core.generic_client import GenericEnvClient


def reply(policy: str, obs: dict[str, Any], turn: int) -> str:
    prompt = obs.get("prompt") or ""
    if policy == "arithmetic":
        a, b = re.findall(r"\d+", prompt)[-2:]
        return str(int(a) + int(b))
    if turn == 0:
        call = {"name": "calculator", "arguments": {"expression": "2+2"}}
        return f"<tool_call>{json.dumps(call)}</tool_call>"
    return "<answer>0</answer>"


async def play(url: str, policy: str, episodes: int) -> list[dict[str, Any]]:
    out = []
    async with GenericEnvClient(base_url=url) as env:
        for _ in range(episodes):
            result = await env.reset()
            steps = []
            while not result.done:
                obs = result.observation
                text = reply(policy, obs, len(steps))
                roles = [m.get("role") for m in obs.get("messages") or []]
                steps.append({"prompt": obs.get("prompt"), "roles": roles, "reply": text})
                result = await env.step({"message": text})
            out.append(
                {
                    "steps": steps,
                    "reward": result.reward,
                    "done": result.done,
                    "metadata": result.metadata,
                }
            )
    return out


async def main(args: list[str]) -> None:
    runs = [args[i : i + 3] for i in range(0, len(args), 3)]
    print(json.dumps([await play(url, policy, int(n)) for url, policy, n in runs]))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
