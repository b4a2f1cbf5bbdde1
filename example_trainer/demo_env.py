"""A minimal environment process for the demo: the arithmetic task over plain HTTP.

It does what an env does, with nothing but the typed API client and the inference server's
OpenAI-compatible ``/v1/completions``: registers with the trajectory API, then keeps ``concurrency``
prompts in flight, each sampled ``group_size`` times (``n``), scores them, and posts one
``ScoredDataGroup`` per prompt with tokens, masks, the inference logprobs and ``policy_version`` (the
trainer step from ``/status-env``). It stops generating while ``max_queued_groups`` of its groups wait in
the API, so what the trainer receives is at most a step or two off-policy.

Run: ``python -m example_trainer.demo_env --api-url URL --inference-url URL [--group-size 8 ...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import sys
from typing import Any, Optional

import httpx

from atroposlib.api.client import AsyncTrajectoryClient
from atroposlib.errors import APIError, APIUnavailable
from atroposlib.type_definitions import RegisterEnv
from example_trainer.arithmetic_task import Problem, make_problem, score_completion

log = logging.getLogger("demo-env")


def build_group(problem: Problem, resp: dict[str, Any], policy_version: int) -> dict[str, Any]:
    """One ``ScoredDataGroup`` from a ``/v1/completions`` answer with ``n`` choices."""
    tokens, masks, inf_lps, scores, messages = [], [], [], [], []
    for ch in resp["choices"]:
        prompt_ids = list(ch["prompt_token_ids"])
        comp_ids = list(ch["token_ids"])
        lps = list(ch["logprobs"]["token_logprobs"])
        tokens.append(prompt_ids + comp_ids)
        masks.append([-100] * len(prompt_ids) + comp_ids)
        inf_lps.append([1.0] * len(prompt_ids) + [float(x) for x in lps])
        scores.append(score_completion(ch["text"], problem))
        messages.append([{"role": "user", "content": problem.prompt},
                         {"role": "assistant", "content": ch["text"]}])
    return {"tokens": tokens, "masks": masks, "scores": scores, "inference_logprobs": inf_lps,
            "messages": messages, "policy_version": policy_version,
            "generation_params": {"temperature": 1.0, "n": len(tokens)}}


class DemoEnv:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.api = AsyncTrajectoryClient(args.api_url, token=args.api_token, timeout=60.0)
        self.http = httpx.AsyncClient(base_url=args.inference_url.rstrip("/"), timeout=120.0)
        self.env_id: Optional[int] = None
        self.step = 0
        self.queued = 0

    async def register(self) -> None:
        reg = RegisterEnv(max_token_length=64, desired_name="arithmetic", group_size=self.args.group_size)
        while True:
            r = await self.api.register_env(reg)
            if r.env_id is not None and r.status != "wait for trainer to start":
                self.env_id = r.env_id
                return
            await asyncio.sleep(0.2)

    async def poll_status(self) -> None:
        while True:
            try:
                s = await self.api.status_env(self.env_id)
                self.step, self.queued = s.current_step, s.self_queue_size
            except (APIError, APIUnavailable) as e:
                log.warning("status-env failed: %s", e)
            await asyncio.sleep(0.05)

    async def worker(self) -> None:
        a = self.args
        while True:
            # /status-env counts this env's waiting groups; keep about one batch waiting
            if self.queued >= a.max_queued_groups:
                await asyncio.sleep(0.02)
                continue
            version = self.step
            problem = make_problem(self.rng)
            resp = await self.http.post("/v1/completions", json={
                "model": "policy", "prompt": problem.prompt, "n": a.group_size, "max_tokens": a.max_tokens,
                "temperature": 1.0, "logprobs": 0, "return_token_ids": True,
            })
            if resp.status_code != 200:
                log.warning("inference answered %s: %s", resp.status_code, resp.text[:200])
                await asyncio.sleep(0.2)
                continue
            group = build_group(problem, resp.json(), version)
            group["env_id"] = self.env_id
            try:
                await self.api.post_scored_data(group)
                self.queued += 1
            except APIError as e:
                log.error("group refused: %s", e)

    async def run(self) -> None:
        await self.register()
        log.info("registered as env %s", self.env_id)
        tasks = [asyncio.create_task(self.poll_status())]
        tasks += [asyncio.create_task(self.worker()) for _ in range(self.args.concurrency)]
        await asyncio.gather(*tasks)


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="demo-env", description=__doc__.splitlines()[0])
    p.add_argument("--api-url", required=True, help="Trajectory API base URL.")
    p.add_argument("--api-token", default=None, help="Bearer token for the API.")
    p.add_argument("--inference-url", required=True, help="Inference server base URL.")
    p.add_argument("--group-size", type=int, default=8, help="Samples per prompt.")
    p.add_argument("--concurrency", type=int, default=8, help="Prompts in flight.")
    p.add_argument("--max-queued-groups", type=int, default=16, help="Pause while this many groups wait.")
    p.add_argument("--max-tokens", type=int, default=4, help="Completion budget in tokens.")
    p.add_argument("--seed", type=int, default=0, help="Problem sampler seed.")
    return p.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        asyncio.run(DemoEnv(parse_args(argv)).run())
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
