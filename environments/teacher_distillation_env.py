"""Teacher distillation: GSM8K rollouts enriched with a teacher's top-k logprobs (Atropos's
``TeacherDistillationEnv`` idea).

The student samples and is scored exactly as in ``gsm8k_server.py``. Then, for every generated token of
every sequence, the teacher server (``--env.teacher_*``) is asked for its top-k next-token logprobs given
the exact prefix, and the group carries ``distill_token_ids`` / ``distill_logprobs`` (one list per token;
empty on prompt positions, which are not trained). A trainer can add a KL-to-teacher term with them.

Teacher and student must share a tokenizer, or the ids mean different things: ``setup`` loads the
teacher's tokenizer (``--env.teacher_tokenizer_name``, or the ``model_path`` the teacher reports on
``/health``) and refuses a mismatch with ``TokenizerMismatch`` saying how they differ.

How logprobs are fetched (``--env.teacher_method``): ``prompt_logprobs`` asks for vLLM's
``prompt_logprobs=k`` on the whole sequence (one forward pass; vLLM and our CPU engine answer it, keyed
by token id); ``prefixes`` sends one batched ``/v1/completions`` request of all prefixes (``max_tokens=1``,
``logprobs=k``) that any OpenAI-compatible completions server answers, at O(length^2) cost and with
top-k keyed by token text (ids that decode alike cannot be told apart). ``auto`` probes the teacher once.

    python environments/teacher_distillation_env.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.teacher_base_url http://127.0.0.1:9002/v1 \\
        --env.data_source procedural --env.total_steps 2
"""

import logging
from typing import Literal, Optional

import httpx
from envkit.distill import (
    check_same_tokenizer,
    positions_to_score,
    text_to_id,
    top_k_entry,
    top_k_from_prompt_logprobs,
)
from envkit.servers import extra_server
from gsm8k_server import GSM8kConfig, GSM8kEnv
from pydantic import Field

from atroposlib.envs.base import APIServerConfig, load_tokenizer
from atroposlib.errors import ConfigError, InferenceError
from atroposlib.groups import Groups
from atroposlib.type_definitions import ScoredData

logger = logging.getLogger(__name__)


class DistillConfig(GSM8kConfig):
    teacher_base_url: Optional[str] = Field(
        default=None, pattern=r"^https?://", description="Teacher server URL (required)."
    )
    teacher_model_name: str = Field(
        default="teacher", description="Model name sent to the teacher."
    )
    teacher_server_type: Literal["vllm", "trl"] = Field(
        default="vllm", description="Teacher backend."
    )
    teacher_api_key: str = Field(default="x", description="Teacher API key.")
    teacher_tokenizer_name: str = Field(
        default="none",
        description="Teacher tokenizer; 'none' uses the model_path the teacher reports.",
    )
    teacher_top_k: int = Field(
        default=4, ge=1, le=20, description="Top-k logprobs per token position."
    )
    teacher_batch_size: int = Field(
        default=64, ge=1, description="Prefixes per request (prefixes method)."
    )
    teacher_method: Literal["auto", "prompt_logprobs", "prefixes"] = Field(
        default="auto", description="How to fetch teacher logprobs (see the module docstring)."
    )


class TeacherDistillationEnv(GSM8kEnv):
    name = "gsm8k_distill"
    env_config_cls = DistillConfig

    @classmethod
    def config_init(cls) -> tuple[DistillConfig, list[APIServerConfig]]:
        env_config, servers = super().config_init()  # GSM8K's settings, as a DistillConfig
        return env_config.model_copy(
            update={"teacher_base_url": "http://localhost:9002/v1"}
        ), servers

    async def setup(self) -> None:
        await super().setup()
        cfg = self.config
        if not cfg.teacher_base_url:
            raise ConfigError("teacher distillation needs --env.teacher_base_url")
        teacher_tokenizer_name = cfg.teacher_tokenizer_name
        if teacher_tokenizer_name == "none":
            teacher_tokenizer_name = await self.teacher_model_path(cfg.teacher_base_url)
        check_same_tokenizer(
            self.tokenizer,
            load_tokenizer(teacher_tokenizer_name),
            cfg.tokenizer_name,
            teacher_tokenizer_name,
        )
        self.teacher = extra_server(
            cfg.teacher_base_url,
            cfg.teacher_model_name,
            cfg.teacher_server_type,
            cfg.teacher_api_key,
        )
        self.token_ids = text_to_id(self.tokenizer)
        self.teacher_failures = 0
        self.set_metric("train/teacher_failures", 0)
        self.method = cfg.teacher_method
        if self.method == "auto":
            try:
                probe = await self.teacher.completion(
                    prompt=[0, 1, 2], max_tokens=1, temperature=0.0, prompt_logprobs=1
                )
                has = getattr(probe.choices[0], "prompt_logprobs", None) is not None
            except InferenceError as exc:  # e.g. a server that rejects the unknown field with a 400
                logger.info("teacher refused prompt_logprobs (%s)", exc)
                has = False
            self.method = "prompt_logprobs" if has else "prefixes"
        logger.info("teacher logprobs via %s", self.method)

    @staticmethod
    async def teacher_model_path(base_url: str) -> str:
        root = base_url.rstrip("/").removesuffix("/v1")
        try:
            async with httpx.AsyncClient(timeout=30) as client:
                path = (await client.get(f"{root}/health")).json().get("model_path")
        except (httpx.HTTPError, ValueError) as exc:
            raise ConfigError(
                f"cannot ask the teacher at {root}/health for its model ({exc!r}); "
                "set --env.teacher_tokenizer_name"
            ) from None
        if not path:
            raise ConfigError(
                "the teacher does not report a model_path; set --env.teacher_tokenizer_name"
            )
        return path

    async def teacher_top_k(self, tokens: list[int], masks: list[int]):
        """Per position: the teacher's top-k (ids, logprobs) for the token there; empty when not trained."""
        ids: list[list[int]] = [[] for _ in tokens]
        logprobs: list[list[float]] = [[] for _ in tokens]
        positions = positions_to_score(masks)
        k = self.config.teacher_top_k
        if self.method == "prompt_logprobs":
            try:
                completion = await self.teacher.completion(
                    prompt=tokens, max_tokens=1, temperature=0.0, prompt_logprobs=k
                )
            except InferenceError as exc:  # e.g. a sequence filling the teacher's whole context
                logger.info(
                    "prompt_logprobs request refused (%s); using prefixes for this sequence", exc
                )
            else:
                entries = completion.choices[0].prompt_logprobs
                for p in positions:
                    ids[p], logprobs[p] = top_k_from_prompt_logprobs(entries[p], k)
                return ids, logprobs
        step = self.config.teacher_batch_size
        for start in range(0, len(positions), step):
            chunk = positions[start : start + step]
            completion = await self.teacher.completion(
                prompt=[tokens[:p] for p in chunk],
                max_tokens=1,
                temperature=0.0,
                logprobs=self.config.teacher_top_k,
            )
            for p, choice in zip(
                chunk, sorted(completion.choices, key=lambda c: c.index), strict=True
            ):
                top = choice.logprobs.top_logprobs[0]
                ids[p], logprobs[p] = top_k_entry(top, self.token_ids, self.config.teacher_top_k)
        return ids, logprobs

    async def postprocess_histories(self, trajectories: Groups) -> Groups:
        groups = trajectories if isinstance(trajectories, list) else [trajectories]
        for i, group in enumerate(groups):
            if group is None:
                continue
            if isinstance(group, ScoredData):  # built and validated: extend its dict, sent checked
                group = groups[i] = group.as_group()
            try:
                fetched = [
                    await self.teacher_top_k(t, m)
                    for t, m in zip(group["tokens"], group["masks"], strict=True)
                ]
            except (
                InferenceError
            ) as exc:  # the group stays valid for RL; it just carries no teacher signal
                self.teacher_failures += 1
                self.set_metric("train/teacher_failures", self.teacher_failures)
                logger.warning(
                    "teacher failed (%s); sending the group without distillation arrays", exc
                )
                continue
            group["distill_token_ids"] = [f[0] for f in fetched]
            group["distill_logprobs"] = [f[1] for f in fetched]
        return groups if isinstance(trajectories, list) else groups[0]


if __name__ == "__main__":
    TeacherDistillationEnv.cli()
