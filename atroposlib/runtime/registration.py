"""``serve``'s start-up with the trajectory API: ``/register-env`` then ``/info``.

* While the API answers "wait for trainer to start", registration waits and says so at once and
  then every ``HINT_EVERY`` seconds: how long it has waited, whether a trainer has registered yet,
  and what would start it (a trainer, or ``atropos-sft-gen`` to try ``serve`` without one).
* While the API cannot be reached, registration retries until ``--env.unreachable_timeout``
  seconds have passed without it ever answering; then the run ends with ``RunFailed`` (one line
  naming the URL and the flag to check). An API that did answer (e.g. "wait for trainer") is never
  given up on: it is there, the trainer is just late.
"""

from __future__ import annotations

import asyncio
import logging
import time

from atroposlib.api.client import AsyncTrajectoryClient
from atroposlib.errors import APIError, APIUnavailable, ConfigError, RunFailed
from atroposlib.runtime.atropos_hooks import apply_info
from atroposlib.runtime.context import EnvRuntime
from atroposlib.runtime.stopping import sleep_or_stop
from atroposlib.type_definitions import RegisterEnv, RegisterEnvResponse

logger = logging.getLogger(__name__)
HINT_EVERY = 30.0
WAIT_STATUS = "wait for trainer to start"


def no_trainer_hint(url: str, group_size: int, waited: float, trainer_registered: bool) -> str:
    """The line ``serve`` logs while the API waits for a trainer: what it waits for, and what
    would start it (a trainer, or an exporter playing one)."""
    state = (
        "a trainer has registered but not yet asked for its first batch"
        if trainer_registered
        else "no trainer has registered with it yet"
    )
    return (
        f"waiting for a trainer ({waited:.0f}s so far): the trajectory API at {url} hands out work "
        f"once a trainer registers and asks for its first batch; {state}. Start your trainer "
        f"(e.g. `atropos-grpo --api-url {url} ...`, see docs/training.md), or to try serve without "
        f"one let `atropos-sft-gen try.jsonl --api-url {url} --group-size {group_size} "
        "--tasks-per-step 2 --save-messages --idle-timeout 30` take the batches"
    )


async def _trainer_registered(client: AsyncTrajectoryClient) -> bool:
    """Whether a trainer has registered (``/info`` says its batch size); False when unknown."""
    try:
        info = await client.info()
    except (APIUnavailable, APIError):
        return False
    return info.batch_size is not None and info.batch_size > 0


async def register(env: EnvRuntime, client: AsyncTrajectoryClient, stop: asyncio.Event) -> bool:
    """Register the env; True once registered, False if stopped first. Raises ``RunFailed`` when
    the API never answered within the deadline, ``ConfigError`` for an impossible setting."""
    cfg = env.config
    req = RegisterEnv(
        max_token_length=cfg.max_token_length,
        desired_name=cfg.wandb_name or env.name or type(env).__name__,
        weight=cfg.inference_weight if cfg.inference_weight >= 0 else 1.0,
        group_size=cfg.group_size,
        min_batch_allocation=cfg.min_batch_allocation,
    )
    start = time.monotonic()
    answered = False
    last_hint = 0.0
    while not stop.is_set():
        try:
            resp = await client.register_env(req)
        except APIError as e:
            if e.status_code == 422:  # this env's settings: retrying cannot help
                raise ConfigError(f"the API refused this env's registration: {e.message}") from None
            raise
        except APIUnavailable as e:
            waited = time.monotonic() - start
            if not answered and waited > cfg.unreachable_timeout:
                raise RunFailed(
                    f"trajectory API at {cfg.rollout_server_url} did not answer for {waited:.0f}s "
                    f"({e}): is run-api running? check --env.rollout_server_url "
                    "(--env.unreachable_timeout sets how long to wait)"
                ) from None
            if time.monotonic() - last_hint > HINT_EVERY:
                logger.info("waiting to register: API unreachable (%s)", e)
                last_hint = time.monotonic()
        else:
            answered = True
            if resp.env_id is not None and resp.status != WAIT_STATUS:
                apply_registration(env, req, resp)
                return True
            if time.monotonic() - last_hint > HINT_EVERY:
                registered = await _trainer_registered(client)
                waited = time.monotonic() - start
                logger.info(
                    no_trainer_hint(cfg.rollout_server_url, cfg.group_size, waited, registered)
                )
                last_hint = time.monotonic()
        await sleep_or_stop(stop, 1.0)
    return False


def apply_registration(env: EnvRuntime, req: RegisterEnv, resp: RegisterEnvResponse) -> None:
    """What ``/register-env`` answered goes to the env's run context (never its config); an env
    that resumes past step 0 loads its checkpoint."""
    ctx, cfg = env.context, env.config
    ctx.env_id = resp.env_id
    ctx.wandb_prepend = resp.wandb_name or req.desired_name
    ctx.curr_step = resp.starting_step or 0
    ctx.checkpoint_dir = resp.checkpoint_dir or ""
    ctx.checkpoint_interval = (
        resp.checkpoint_interval if resp.checkpoint_interval is not None else -1
    )
    if cfg.total_steps == -1:
        if not resp.num_steps:
            raise ConfigError("total_steps is -1 and the trainer did not set num_steps")
        ctx.total_steps = resp.num_steps
    if ctx.curr_step > 0:
        env.load_checkpoint()
    logger.info(
        "registered as env %s (%s) at step %s; serving until trainer step %s",
        ctx.env_id,
        ctx.wandb_prepend,
        ctx.curr_step,
        ctx.effective_total_steps(cfg),
    )


async def read_info(env: EnvRuntime, client: AsyncTrajectoryClient, stop: asyncio.Event) -> None:
    """Batch size and max token length from the trainer's registration (``/info``)."""
    while not stop.is_set():
        try:
            info = await client.info()
            break
        except APIUnavailable:
            await sleep_or_stop(stop, 1.0)
    else:
        return
    apply_info(env.context, env.config, info.batch_size, info.max_token_len)


__all__ = ["HINT_EVERY", "apply_registration", "no_trainer_hint", "read_info", "register"]
