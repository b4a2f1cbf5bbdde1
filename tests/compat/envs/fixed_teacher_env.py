"""The groups of ``fixed_groups_env.py`` sent through Atropos's ``TeacherDistillationEnv``: the
teacher is given with ``--teacher.*`` flags or a ``teacher:`` YAML section, as in Atropos."""

from fixed_groups_env import FixedGroupsEnv

from atroposlib.envs.base import APIServerConfig
from atroposlib.envs.teacher_distillation_env import (
    TeacherDistillationConfig,
    TeacherDistillationEnv,
)


class FixedTeacherEnv(FixedGroupsEnv, TeacherDistillationEnv):
    name = "fixed_teacher"
    env_config_cls = TeacherDistillationConfig

    @classmethod
    def config_init(cls):
        env_config, servers = super().config_init()
        return TeacherDistillationConfig(
            **env_config.model_dump(), teacher_enabled=True, teacher_top_k=2
        ), servers

    @classmethod
    def teacher_config_init(cls):
        return None  # given on the command line or in the YAML


if __name__ == "__main__":
    FixedTeacherEnv.cli()


__all__ = ["APIServerConfig", "FixedTeacherEnv"]
