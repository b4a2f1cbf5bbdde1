"""The error model holds for the whole package: every exception class a user may catch, wherever it is
defined, derives from ``AtroposError`` and is ``atroposlib.errors.<Name>`` (the defining module
re-exports it); internal signals are private (an underscore name, or left out of the module's
``__all__``). ``RunFailed`` exists once: the launcher's is the package's."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import atroposlib
from atroposlib import errors
from atroposlib.errors import AtroposError


def _modules() -> tuple[list[ModuleType], list[str]]:
    """Every module of atroposlib that imports here, and those skipped for a missing optional
    dependency (one outside atroposlib, e.g. vllm in the vLLM plugin)."""
    found, skipped = [], []
    for info in pkgutil.walk_packages(atroposlib.__path__, "atroposlib."):
        try:
            found.append(importlib.import_module(info.name))
        except ImportError as e:
            missing = getattr(e, "name", None) or ""
            if missing == "atroposlib" or missing.startswith("atroposlib."):
                raise
            skipped.append(f"{info.name} ({missing})")
    return found, skipped


def _is_public(module: ModuleType, name: str) -> bool:
    if name.startswith("_"):
        return False
    declared = getattr(module, "__all__", None)
    return declared is None or name in declared


@pytest.fixture(scope="module")
def defined_exceptions() -> list[tuple[str, str, type[BaseException]]]:
    """(module, name, class) of every exception class defined in a module of atroposlib."""
    modules, skipped = _modules()
    assert len(modules) > 200, skipped  # the walk reached the package, not a stub of it
    return [
        (m.__name__, name, value)
        for m in modules
        for name, value in vars(m).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == m.__name__
    ]


def test_every_public_exception_is_an_atropos_error_in_errors(defined_exceptions):
    public = [
        (module, name, cls)
        for module, name, cls in defined_exceptions
        if _is_public(importlib.import_module(module), name)
    ]
    assert any(module != "atroposlib.errors" for module, _, _ in defined_exceptions)
    outside = [f"{module}.{name}" for module, name, _ in public if module != "atroposlib.errors"]
    assert not outside, f"public exceptions defined outside atroposlib.errors: {outside}"
    not_ours = [name for _, name, cls in public if not issubclass(cls, AtroposError)]
    assert not not_ours, f"public exceptions that are no AtroposError: {not_ours}"
    missing = [name for _, name, cls in public if getattr(errors, name, None) is not cls]
    assert not missing, missing


def test_errors_lists_each_class_once_with_a_docstring():
    classes = {
        name: value
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, BaseException)
    }
    assert sorted(classes) == sorted(errors.__all__)
    assert [name for name, cls in classes.items() if not cls.__dict__.get("__doc__")] == []


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("atroposlib.launch.run_loop", ["RunFailed", "StopRequested"]),
        ("atroposlib.launch.local", ["RunFailed"]),
        ("atroposlib.api.http", ["ApiProblem"]),
        ("atroposlib.inference.http", ["BadRequest"]),
        ("atroposlib.inference.server", ["BadRequest"]),
        ("atroposlib.inference_clients.backend", ["ServerDown", "ServerSlow", "ServerSilent"]),
        ("atroposlib.runtime.config_loader", ["HelpRequested"]),
        ("atroposlib.datagen.export", ["TrainerAlreadyRegistered"]),
        (
            "atroposlib.envs.teacher_distillation_env",
            ["TeacherSetupError", "TeacherTokenizerMismatch"],
        ),
        ("atroposlib.interop.openenv.client", ["EpisodeError"]),
        ("atroposlib.interop.openenv.bridge", ["EpisodeOver"]),
        ("atroposlib.interop.verifiers.rollout", ["EpisodeFailed"]),
    ],
)
def test_the_old_import_paths_name_the_same_classes(module, names):
    mod = importlib.import_module(module)
    assert [getattr(mod, n) for n in names] == [getattr(errors, n) for n in names]


def test_second_bases_that_callers_rely_on_are_kept():
    assert issubclass(errors.TeacherSetupError, (errors.ConfigError, ValueError))
    assert issubclass(errors.TeacherTokenizerMismatch, errors.TokenizerMismatch)
    assert issubclass(errors.PromptTooLong, ValueError)
    assert issubclass(errors.ServerSlow, errors.ServerDown)
    assert issubclass(errors.ServerDown, errors.InferenceError)


def test_moved_errors_keep_their_fields_and_messages():
    problem = errors.ApiProblem(409, "no trainer", headers={"Retry-After": "5"})
    assert (problem.status_code, problem.error, problem.detail, problem.headers) == (
        409,
        "no trainer",
        None,
        {"Retry-After": "5"},
    )
    bad = errors.BadRequest("n too large", "n")
    assert (str(bad), bad.param, bad.status) == ("n too large", "n", 400)
    episode = errors.EpisodeError("timeout", "no frame in 5s")
    assert str(episode) == "openenv server did not answer in time: no frame in 5s"
    assert episode.kind == "timeout"
    from atroposlib.interop.openenv.client import KINDS

    assert KINDS is errors.EpisodeError.KINDS


def test_run_failed_exists_once():
    from atroposlib.launch import local, run_loop

    assert run_loop.RunFailed is local.RunFailed is errors.RunFailed
    assert issubclass(run_loop.StopRequested, AtroposError)
    # a failed launch caught as an AtroposError: tests/launch/test_health_wait.py
