"""Teacher distillation on top of ``BaseEnv`` (Atropos's ``TeacherDistillationEnv``, from its last
commit; 0.4.0 had none).

Before a group is sent, every sequence's tokens go to a teacher server's ``get_logprobs`` and the
group carries the teacher's top-k per position: ``distill_token_ids`` / ``distill_logprobs``,
``[sequence][position][k]`` (the first position has no prediction: an empty row). Student and teacher
must share one tokenizer (the ids are looked up in the student's vocabulary as they are), which is
checked when the env is made.

Settings: ``--env.teacher_enabled`` (default off) and ``--env.teacher_top_k`` (0: the chosen token
only, as vLLM's ``prompt_logprobs=0``; -1 or less: fetch nothing); a group's ``group_overrides`` may
set ``teacher_top_k`` or ``skip_teacher_top_k``. The teacher servers come from ``--teacher.FIELD``
flags (the fields of ``--openai.FIELD``) or a ``teacher:`` section of the YAML, over the env's
``teacher_config_init()``. A teacher that fails for one sequence leaves the whole group without
distillation arrays (logged); the group itself is sent as usual.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional, Union

from pydantic import Field

from atroposlib.envs.base import BaseEnv
from atroposlib.errors import (  # the teacher's errors are defined there
    ModelLoadError,
    TeacherSetupError,
    TeacherTokenizerMismatch,
)
from atroposlib.groups import Groups
from atroposlib.inference_clients.server_manager import (
    APIServerConfig,
    ServerBaseline,
    ServerManager,
)
from atroposlib.runtime.config import BaseEnvConfig, ServerConfigs
from atroposlib.type_definitions import Item, ScoredData, ScoredDataGroup
from atroposlib.utils.tokenizer_loading import load_tokenizer

logger = logging.getLogger(__name__)

TeacherConfigs = Optional[Union[ServerConfigs, APIServerConfig]]


class TeacherDistillationConfig(BaseEnvConfig):
    teacher_enabled: bool = Field(
        default=False, description="Fetch the teacher's prompt logprobs for every group."
    )
    teacher_top_k: int = Field(
        default=0,
        ge=-1,
        description="Teacher logprobs per position besides the chosen token's (0: the chosen "
        "token only; -1: fetch nothing).",
    )


class TeacherDistillationEnv(BaseEnv):
    """A ``BaseEnv`` whose groups carry a teacher's top-k logprobs (see the module docstring)."""

    env_config_cls: type[BaseEnvConfig] = TeacherDistillationConfig
    teacher_namespace = "teacher"

    @classmethod
    def teacher_config_init(cls) -> TeacherConfigs:
        """Default teacher servers (None: none unless ``--teacher.*`` / ``teacher:`` give some)."""
        return None

    @classmethod
    def server_namespaces(cls) -> dict[str, TeacherConfigs]:
        return {cls.teacher_namespace: cls.teacher_config_init()}

    def __init__(
        self,
        config: BaseEnvConfig,
        server_configs: Union[ServerConfigs, APIServerConfig],
        teacher_server_configs: TeacherConfigs = None,
        slurm: bool = False,
        testing: bool = False,
    ) -> None:
        super().__init__(config, server_configs, slurm=slurm, testing=testing)
        self.teacher_server: Optional[ServerManager] = None
        if not getattr(config, "teacher_enabled", False):
            return
        if teacher_server_configs is None:
            raise TeacherSetupError(
                "teacher_enabled=True but no teacher server configuration was provided: give "
                "--teacher.base_url (and --teacher.model_name), a teacher: section in the YAML, "
                "or teacher_server_configs=... when making the env"
            )
        source = (
            [teacher_server_configs]
            if isinstance(teacher_server_configs, APIServerConfig)
            else teacher_server_configs
        )
        self.teacher_server = ServerManager(
            source, unavailable_wait=getattr(config, "unreachable_timeout", 120.0)
        )
        first: ServerBaseline = source[0] if isinstance(source, list) else source
        name = first.model_name if first.tokenizer_name in ("", "none") else first.tokenizer_name
        self._validate_teacher_tokenizer_compatibility(name)

    def _validate_teacher_tokenizer_compatibility(self, teacher_tokenizer_name: str) -> None:
        """Refuse a teacher whose tokenizer maps any token to another id than the student's."""
        student_name = getattr(self.tokenizer, "name_or_path", None) or ""
        if student_name == teacher_tokenizer_name:
            return
        try:
            teacher_tokenizer = load_tokenizer(
                teacher_tokenizer_name, "set --teacher.tokenizer_name"
            )
        except ModelLoadError as exc:
            raise TeacherSetupError(
                "Cross-tokenizer distillation is not supported, and the teacher tokenizer "
                f"{teacher_tokenizer_name!r} could not be loaded to verify it is the student's: {exc}"
            ) from None
        student_vocab, teacher_vocab = self.tokenizer.get_vocab(), teacher_tokenizer.get_vocab()
        if student_vocab != teacher_vocab:
            differ = sum(
                1
                for t in set(student_vocab) | set(teacher_vocab)
                if student_vocab.get(t) != teacher_vocab.get(t)
            )
            raise TeacherTokenizerMismatch(
                "Cross-tokenizer distillation is not supported: the student tokenizer "
                f"{student_name or type(self.tokenizer).__name__!r} ({len(student_vocab)} tokens) and "
                f"the teacher tokenizer {teacher_tokenizer_name!r} ({len(teacher_vocab)} tokens) "
                f"differ in {differ} entries; serve a teacher of the student's family or set "
                "--teacher.tokenizer_name"
            )

    async def _fetch_teacher_for_sequence(
        self, token_ids: list[int], top_k: int
    ) -> tuple[list[list[int]], list[list[float]]]:
        """The teacher's top-k ids and logprobs at every position of one sequence."""
        assert self.teacher_server is not None
        payload = await self.teacher_server.get_logprobs(
            input_ids=token_ids, top_k=top_k, max_tokens=1, split="train"
        )
        return payload["prompt_topk_token_ids"], payload["prompt_topk_logprobs"]

    async def _attach_teacher_distillation(self, group: Any) -> Any:
        """``group`` (a dict; a built ``ScoredData`` becomes one) with the distillation arrays, or
        with them set to None where there are none."""
        if not getattr(self.config, "teacher_enabled", False) or self.teacher_server is None:
            return group
        if isinstance(group, ScoredData):
            group = dict(group.as_group())
        seqs = group.get("tokens") or []
        overrides = group.get("group_overrides") or {}
        top_k = int(overrides.get("teacher_top_k", getattr(self.config, "teacher_top_k", 0)))
        if not seqs or overrides.get("skip_teacher_top_k", False) or top_k <= -1:
            group["distill_token_ids"] = group["distill_logprobs"] = None
            return group
        results = await asyncio.gather(
            *[self._fetch_teacher_for_sequence(list(seq), top_k) for seq in seqs],
            return_exceptions=True,
        )
        ids_out: list[list[list[int]]] = []
        lps_out: list[list[list[float]]] = []
        for i, result in enumerate(results):
            if isinstance(result, BaseException):
                why = f"failed ({result})"
            elif len(result[0]) != len(result[1]):
                why = f"gave {len(result[0])} id rows but {len(result[1])} logprob rows"
            else:
                ids_out.append(result[0])
                lps_out.append(result[1])
                continue
            logger.warning(
                "teacher logprobs for sequence %d %s; the group goes without distillation arrays",
                i,
                why,
            )
            group["distill_token_ids"] = group["distill_logprobs"] = None
            return group
        group["distill_token_ids"], group["distill_logprobs"] = ids_out, lps_out
        return group

    async def handle_send_to_api(
        self,
        scored_data: Groups,
        item: Item = None,
        do_send_to_api: bool = True,
        abort_on_any_max_length_exceeded: bool = True,
    ) -> list[ScoredDataGroup]:
        groups = scored_data if isinstance(scored_data, list) else [scored_data]
        enriched = [await self._attach_teacher_distillation(g) for g in groups if g is not None]
        payload: Groups = (
            enriched if isinstance(scored_data, list) else (enriched[0] if enriched else None)
        )
        return await super().handle_send_to_api(
            payload, item, do_send_to_api, abort_on_any_max_length_exceeded
        )


__all__ = [
    "TeacherDistillationConfig",
    "TeacherDistillationEnv",
    "TeacherSetupError",
    "TeacherTokenizerMismatch",
]
