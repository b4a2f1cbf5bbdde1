"""What one request recorded in its session's managed server, and taking it back.

Nothing the client did not receive is trained: a generation is recorded by the managed server as it
comes back from the backend, before the proxy has answered; when the client is gone before it has
the whole answer (a stream it closed, a request it abandoned), ``Recording.undo`` removes the nodes
that request added and puts back the node it extended. Requests of one session may overlap: only
this request's own nodes are touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def _pool(managed: Any) -> list[Any]:
    """The nodes ``managed`` holds now (the current nodes, or every sequence of its tree)."""
    if getattr(managed, "track_tree", False):
        return list(managed.sequences.values())
    return list(managed.current_nodes)


@dataclass
class Recording:
    """The nodes of ``managed`` before one request (see the module docstring)."""

    managed: Any
    before: list[Any] = field(default_factory=list)

    @classmethod
    def start(cls, managed: Any) -> Recording:
        return cls(managed, _pool(managed))

    def added(self) -> list[Any]:
        """The nodes recorded since ``start``, in the order they were recorded (choice order)."""
        known = {id(n) for n in self.before}
        return [n for n in _pool(self.managed) if id(n) not in known]

    def undo(self) -> int:
        """Remove the nodes recorded since ``start`` and restore those they replaced; how many
        were removed."""
        added = self.added()
        gone = {id(n) for n in added}
        if getattr(self.managed, "track_tree", False):
            for key in [k for k, n in self.managed.sequences.items() if id(n) in gone]:
                del self.managed.sequences[key]
            return len(added)
        now = {id(n) for n in self.managed.current_nodes}
        kept = [n for n in self.managed.current_nodes if id(n) not in gone]
        restored = [  # the node one of ours extended (its tokens start ours)
            n
            for n in self.before
            if id(n) not in now and any(a.tokens[: len(n.tokens)] == n.tokens for a in added)
        ]
        self.managed.current_nodes[:] = kept + restored
        return len(added)


__all__ = ["Recording"]
