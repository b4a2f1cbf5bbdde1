"""Teacher distillation: GSM8K rollouts enriched with a teacher's top-k logprobs, on Atropos's
``TeacherDistillationEnv`` base (``atroposlib.envs.teacher_distillation_env``).

The student samples and is scored exactly as in ``gsm8k_server.py`` (the same base class,
``atroposlib.envkit.math_env.MathAnswerEnv``, and GSM8K's data from ``atroposlib.envkit.gsm8k``). Before a group is sent, the base
asks the teacher (``--teacher.base_url``, ``--teacher.model_name``, ``--teacher.tokenizer_name``, ...:
the fields of ``--openai.*``) for its top-k (``--env.teacher_top_k``) next-token logprobs at every
position of every sequence, and the group carries ``distill_token_ids`` / ``distill_logprobs``
(``[sequence][position][k]``; the first position has no prediction). A trainer can add a KL-to-teacher
term with them. Teacher and student must share a tokenizer: a teacher whose tokenizer
(``--teacher.tokenizer_name``, else its model name) differs is refused when the env starts.

How logprobs are fetched (``--env.teacher_method``): ``prompt_logprobs`` is the base's
``get_logprobs``, vLLM's ``prompt_logprobs=k`` on the whole sequence (one forward pass; vLLM and our CPU
engine answer it, keyed by token id); ``prefixes`` sends batched ``/v1/completions`` requests of every
prefix (``max_tokens=1``, ``logprobs=k``) that any OpenAI-compatible completions server answers, at
O(length^2) cost and with top-k keyed by token text (ids that decode alike cannot be told apart);
it is also the fallback for a sequence the teacher refuses ``prompt_logprobs`` for (one that fills
its whole context). ``auto`` probes the teacher once.

    python environments/teacher_distillation_env.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --teacher.base_url http://127.0.0.1:9002/v1 \\
        --teacher.tokenizer_name MODEL_DIR --env.data_source procedural --env.total_steps 2
"""

import logging
from typing import Literal

from pydantic import Field

from atroposlib.envkit.distill import text_to_id, top_k_entry
from atroposlib.envkit.gsm8k import GSM8K_ANSWER_FORMAT, GSM8kConfig, gsm8k_problems_from
from atroposlib.envkit.math_env import MathAnswerEnv
from atroposlib.envkit.servers import local_defaults
from atroposlib.envs.base import APIServerConfig
from atroposlib.envs.teacher_distillation_env import (
    TeacherDistillationConfig,
    TeacherDistillationEnv,
)
from atroposlib.errors import InferenceError, InferenceRejected
from atroposlib.type_definitions import Item

logger = logging.getLogger(__name__)


class DistillConfig(GSM8kConfig, TeacherDistillationConfig):
    teacher_enabled: bool = Field(
        default=True, description="Fetch the teacher's logprobs for every group."
    )
    teacher_top_k: int = Field(
        default=4, ge=-1, le=20, description="Top-k logprobs per token position (-1: none)."
    )
    teacher_batch_size: int = Field(
        default=64, ge=1, description="Prefixes per request (prefixes method)."
    )
    teacher_method: Literal["auto", "prompt_logprobs", "prefixes"] = Field(
        default="auto", description="How to fetch teacher logprobs (see the module docstring)."
    )


class GSM8kTeacherDistillEnv(MathAnswerEnv, TeacherDistillationEnv):
    name = "gsm8k_distill"
    env_config_cls = DistillConfig
    answer_format = GSM8K_ANSWER_FORMAT
    config_init = local_defaults(group_size=8, max_token_length=2048, batch_size=12)

    def load_problems(self) -> tuple[list[Item], list[Item]]:
        train, test, self.eval_data_source = gsm8k_problems_from(self.config)  # in metrics.json
        return train, test

    @classmethod
    def teacher_config_init(cls) -> APIServerConfig:
        return APIServerConfig(
            base_url="http://localhost:9002/v1", model_name="teacher", server_type="vllm"
        )

    async def setup(self) -> None:
        await super().setup()
        self.method = self.config.teacher_method
        if self.teacher_server is None or self.method != "auto":
            return
        try:
            probe = await self.teacher_server.completion(
                prompt=[0, 1, 2], max_tokens=1, temperature=0.0, prompt_logprobs=1
            )
            has = getattr(probe.choices[0], "prompt_logprobs", None) is not None
        except InferenceError as exc:  # e.g. a server that rejects the unknown field with a 400
            logger.info("teacher refused prompt_logprobs (%s)", exc)
            has = False
        self.method = "prompt_logprobs" if has else "prefixes"
        logger.info("teacher logprobs via %s", self.method)

    async def _fetch_teacher_for_sequence(self, token_ids: list[int], top_k: int):
        if self.method != "prefixes":
            try:
                return await super()._fetch_teacher_for_sequence(token_ids, top_k)
            except InferenceRejected as exc:  # e.g. a sequence filling the teacher's whole context
                logger.info("prompt_logprobs refused (%s); prefixes for this sequence", exc)
        return await self._prefix_top_k(token_ids, top_k)

    async def _prefix_top_k(self, token_ids: list[int], top_k: int):
        """The prefixes method: one completion of each prefix, its first token's top-k logprobs."""
        if not hasattr(self, "token_ids"):
            self.token_ids = text_to_id(self.tokenizer)
        k = max(1, top_k)
        ids: list[list[int]] = [[]]
        logprobs: list[list[float]] = [[]]
        positions = list(range(1, len(token_ids)))
        step = self.config.teacher_batch_size
        for start in range(0, len(positions), step):
            chunk = positions[start : start + step]
            completion = await self.teacher_server.completion(
                prompt=[token_ids[:p] for p in chunk], max_tokens=1, temperature=0.0, logprobs=k
            )
            for choice in sorted(completion.choices, key=lambda c: c.index):
                row_ids, row_lps = top_k_entry(choice.logprobs.top_logprobs[0], self.token_ids, k)
                ids.append(row_ids)
                logprobs.append(row_lps)
        return ids, logprobs


TeacherDistillationEnv = GSM8kTeacherDistillEnv  # this file's env under its former name

if __name__ == "__main__":
    GSM8kTeacherDistillEnv.cli()
