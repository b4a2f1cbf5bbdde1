"""What ``dir()`` shows of an env class or env object: the contract, not Atropos's names.

A ``BaseEnv`` subclass inherits two layers: the contract (``base.BaseEnv``: the hooks an author
writes, ``cli``, the helpers and collaborators an env uses) and Atropos's names
(``atropos_compat.AtroposCompat``: ``handle_send_to_api``, ``save_checkpoint``, ``self.curr_step``
and some thirty more, which env files written for Atropos call, assign or override). ``dir()`` of
the class or of an instance, and what reads ``dir()`` (``help()``, ``inspect.getmembers``, the
REPL's and IPython's completion), leaves out every name of a layer marked ``_hidden_from_dir``
(here: ``AtroposCompat``, its methods, descriptors and annotated instance attributes) unless a class
ahead of that layer in the MRO defines the name itself: an env file that overrides
``save_checkpoint`` sees its own ``save_checkpoint`` listed. Hidden names are not gone: attribute
lookup, ``super().save_checkpoint(...)``, assignment through the context descriptors and
``atropos_hooks.overrides`` work exactly as before; only the listing changes.

Why this design, and not the others considered:

* The Atropos names stay real class attributes of a base class. Atropos env files call
  ``super().save_checkpoint(step, data)`` (28 of them), ``super().wandb_log(...)`` (75),
  ``super().cli()``, ``super().load_checkpoint()``; ``super()`` looks only in the ``__dict__`` of
  the classes of the MRO, never in a ``__getattr__``, so names resolved lazily (a class or
  instance ``__getattr__``, a namespace object, private methods with aliases) would break those
  calls. They assign ``self.rollouts_for_wandb = []`` or ``self.eval_metrics = []``, which must go
  through the context descriptors, not land in the instance ``__dict__``.
* mypy sees the names with their signatures. With a ``__getattr__`` as the static view, mypy
  rejects ``super().save_checkpoint`` ("undefined in superclass") and cannot type
  ``self.curr_step = 3``; and every typo on an env (``self.add_metrc``) would type as ``Any``
  instead of failing. So an editor that reads the source (pyright, PyCharm) also lists them in
  completion; their docstrings start with "Atropos's name" so a newcomer can tell them apart.
* The metaclass (``EnvMeta``) derives from ``ABCMeta``: Atropos's ``BaseEnv`` was an ``ABC``, and an
  env family declared ``class MyBase(BaseEnv, ABC)`` must not meet a metaclass conflict.
"""

from __future__ import annotations

import inspect
from abc import ABCMeta
from collections.abc import Iterable

HIDDEN_MARK = "_hidden_from_dir"
"""The class attribute that marks a layer whose names ``dir()`` leaves out (``True`` in its own
body; subclasses inherit the value but are not hidden layers themselves)."""


def _own_names(klass: type) -> set[str]:
    """The names ``klass`` defines in its body: attributes, methods, annotated instance
    attributes."""
    return set(vars(klass)) | set(inspect.get_annotations(klass))


def hidden_names(cls: type) -> frozenset[str]:
    """The public names of ``cls``'s hidden layers that no class ahead of them in the MRO
    defines."""
    hidden: set[str] = set()
    defined_ahead: set[str] = set()
    for klass in cls.__mro__:
        own = _own_names(klass)
        if vars(klass).get(HIDDEN_MARK, False):
            hidden |= {name for name in own if not name.startswith("_")} - defined_ahead
        defined_ahead |= own
    return frozenset(hidden)


def visible(cls: type, names: Iterable[str]) -> list[str]:
    """``names`` (what ``dir()`` would list for ``cls`` or one of its objects) minus the hidden
    ones."""
    hidden = hidden_names(cls)
    return sorted(name for name in names if name not in hidden)


class EnvMeta(ABCMeta):
    """The metaclass of ``BaseEnv``: ``dir()`` of an env class lists the contract (see the module
    docstring); everything else is ``ABCMeta``'s."""

    def __dir__(cls) -> list[str]:
        return visible(cls, super().__dir__())


__all__ = ["HIDDEN_MARK", "EnvMeta", "hidden_names", "visible"]
