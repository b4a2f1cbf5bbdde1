"""What a new env author sees of ``BaseEnv``: ``dir()`` of a plain subclass and of its objects,
``help()`` and the docs' contract table are the contract, exactly (``atroposlib/envs/surface.py``).

A public name added to ``BaseEnv`` fails the first test until it is added here and to the table in
docs/environments.md ("The contract"); Atropos's names stay out of the listing and keep working
(tests/compat/test_atropos_env_names.py)."""

from __future__ import annotations

import pydoc
import re
import rlcompleter
from abc import ABC, abstractmethod
from pathlib import Path

import pytest

from atroposlib.envs import atropos_compat
from atroposlib.envs.atropos_compat import AtroposCompat
from atroposlib.envs.base import BaseEnv
from atroposlib.envs.surface import hidden_names
from atroposlib.inference_clients.server_manager import APIServerConfig

DOCS = Path(__file__).resolve().parents[2] / "docs" / "environments.md"

CONTRACT_ON_THE_CLASS = [
    "add_metric",
    "cleanup",
    "cli",
    "collect_trajectories",
    "collect_trajectory",
    "config_init",
    "context",
    "env_config_cls",
    "evaluate",
    "get_next_item",
    "group_builder",
    "name",
    "postprocess_histories",
    "score_samples",
    "server_namespaces",
    "set_metric",
    "setup",
]
CONTRACT_ON_THE_OBJECT = sorted(CONTRACT_ON_THE_CLASS + ["config", "server", "tokenizer"])


class PlainEnv(BaseEnv):
    """Provides the two hooks an env must, nothing else."""

    async def get_next_item(self):
        return None

    async def collect_trajectories(self, item):
        return None, []


def _public(names) -> list[str]:
    return sorted(n for n in names if not n.startswith("_"))


def _plain_env(tok_dir) -> PlainEnv:
    cfg, _ = PlainEnv.config_init()
    cfg = cfg.model_copy(update={"tokenizer_name": str(tok_dir)})
    server = APIServerConfig(base_url="http://127.0.0.1:9/v1", server_type="vllm")
    return PlainEnv(cfg, [server.model_copy(update={"health_check": False})])


def test_dir_of_a_plain_env_class_is_the_contract():
    own = {"get_next_item", "collect_trajectories"}
    assert _public(dir(PlainEnv)) == sorted(set(CONTRACT_ON_THE_CLASS) | own)
    assert _public(dir(BaseEnv)) == CONTRACT_ON_THE_CLASS


def test_dir_of_an_env_object_adds_its_collaborators(tok_dir):
    assert _public(dir(_plain_env(tok_dir))) == CONTRACT_ON_THE_OBJECT


def test_an_env_lists_what_its_own_classes_and_object_add(tok_dir):
    class OwnNames(PlainEnv):
        async def setup(self):
            self.rng = 0

        def save_checkpoint(self, step, data=None):  # an Atropos hook it overrides: its own now
            super().save_checkpoint(step, data)

    env = object.__new__(OwnNames)
    env.rng = 1
    assert {"save_checkpoint", "rng"} <= set(dir(env)) and "save_checkpoint" in dir(OwnNames)
    assert "load_checkpoint" not in dir(env) and "curr_step" not in dir(env)


def test_the_repl_completion_offers_the_contract(tok_dir):
    env = _plain_env(tok_dir)
    completer = rlcompleter.Completer({"env": env})
    offered, state = [], 0
    while (match := completer.complete("env.", state)) is not None:
        offered.append(match.removeprefix("env.").removesuffix("()").removesuffix("("))
        state += 1
    # rlcompleter also lists dir() of every base class: AtroposCompat's own dir() hides its names
    assert _public(offered) == CONTRACT_ON_THE_OBJECT and _public(dir(AtroposCompat)) == []


def test_every_hidden_name_still_resolves_and_is_listed_in_the_compat_docstring(tok_dir):
    env = _plain_env(tok_dir)
    hidden = hidden_names(PlainEnv)
    assert {"handle_send_to_api", "wandb_log", "curr_step", "workers", "server_cls"} <= hidden
    assert not hidden & set(CONTRACT_ON_THE_OBJECT)
    unresolved = [name for name in sorted(hidden) if not hasattr(env, name)]
    assert unresolved == []
    documented = set(re.findall(r"``(\w+)``", atropos_compat.__doc__ or ""))
    assert sorted(hidden - documented) == []


def test_an_atropos_name_assigned_on_the_object_goes_to_its_context(tok_dir):
    env = _plain_env(tok_dir)
    env.curr_step = 7
    env.eval_metrics = [("eval/acc", 1.0)]
    assert env.context.curr_step == 7 and env.context.eval_metrics == [("eval/acc", 1.0)]
    assert "curr_step" not in vars(env) and "curr_step" not in dir(env)


def test_help_of_an_env_documents_the_contract_and_no_atropos_name():
    text = pydoc.render_doc(PlainEnv, renderer=pydoc.plaintext)
    documented = set(re.findall(r"^ \|  (?:async )?([a-z]\w*)(?:\(| = |$)", text, re.M))
    assert documented == set(CONTRACT_ON_THE_CLASS)


def test_help_of_base_env_states_the_contract_before_the_atropos_names():
    doc = BaseEnv.__doc__ or ""
    contract_at = doc.index("Its contract")
    first_atropos = min(doc.index(name) for name in ("curr_step", "handle_send_to_api"))
    assert contract_at < first_atropos
    assert all(f"``{name}" in doc[:first_atropos] for name in CONTRACT_ON_THE_OBJECT)


def test_the_docs_contract_table_is_the_contract():
    text = DOCS.read_text()
    section = text.split("### The contract\n", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `(\w+)", section, re.M)
    assert sorted(rows) == CONTRACT_ON_THE_OBJECT and len(rows) == len(set(rows))
    assert text.index("### The contract") < text.index("### Atropos's names")


def test_an_env_family_may_still_be_an_abc_as_on_atropos():
    class Family(BaseEnv, ABC):
        @abstractmethod
        def prompt(self, item): ...

    with pytest.raises(TypeError, match="abstract"):
        object.__new__(Family)  # ABCMeta refuses an abstract class, as Atropos's ABC BaseEnv did
    assert "prompt" in dir(Family)
