"""Token-only multi-turn groups built with a real tokenizer, and a reader of the rendered cards.

``sequence(tok, turns)`` tokenizes ChatML turns one message at a time, as an env that extends its
token list turn by turn does: the assistant turns are trained (their token ids as masks), everything
else (system, user, tool output) is masked with -100. ``CardReader`` parses the report's or
view-run's HTML back into, per sequence card, the text of its own prompt and of its completion.
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any, Optional

IGNORE = -100


def encode(tok: Any, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False))


def sequence(
    tok: Any, turns: list[tuple[str, str]], train_assistant_from: int = 0
) -> tuple[list[int], list[int]]:
    """(tokens, masks) of ChatML ``turns`` ((role, content) pairs). Assistant turns from the
    ``train_assistant_from``-th on are trained (content and end marker); the rest is masked."""
    ids: list[int] = []
    masks: list[int] = []
    assistant_seen = 0
    for n, (role, content) in enumerate(turns):
        head = encode(tok, f"<|im_start|>{role}\n")
        body = encode(tok, f"{content}<|im_end|>")
        trained = role == "assistant" and assistant_seen >= train_assistant_from
        assistant_seen += role == "assistant"
        ids += head
        masks += [IGNORE] * len(head)
        ids += body
        masks += body if trained else [IGNORE] * len(body)
        if n < len(turns) - 1:
            nl = encode(tok, "\n")
            ids += nl
            masks += [IGNORE] * len(nl)
    return ids, masks


def group(rows: list[tuple[list[int], list[int]]], scores: list[float]) -> dict[str, Any]:
    """A token-only scored group (no messages) of ``rows``."""
    return {
        "tokens": [r[0] for r in rows],
        "masks": [r[1] for r in rows],
        "scores": scores,
        "env_name": "tools",
    }


def first_trained(masks: list[int]) -> int:
    return next(i for i, m in enumerate(masks) if m != IGNORE)


class CardReader(HTMLParser):
    """The shared prompt's text, and per sequence card the text of its own prompt and completion
    (the ``pre.text`` blocks inside ``div.prompt``, ``div.seq-prompt`` and ``div.completion``)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, set[str]]] = []
        self.shared_prompt: Optional[str] = None
        self.seqs: list[dict[str, Optional[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        classes = set((dict(attrs).get("class") or "").split())
        self.stack.append((tag, classes))
        if tag == "div" and "seq" in classes:
            self.seqs.append({"prompt": None, "completion": None})

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def _inside(self, name: str) -> bool:
        return any(name in classes for _, classes in self.stack)

    def handle_data(self, data: str) -> None:
        if not any(tag == "pre" and "text" in classes for tag, classes in self.stack):
            return
        if self._inside("seq"):
            key = (
                "prompt"
                if self._inside("seq-prompt")
                else "completion"
                if self._inside("completion")
                else None
            )
            if key is not None:
                self.seqs[-1][key] = (self.seqs[-1][key] or "") + data
        elif self._inside("prompt"):
            self.shared_prompt = (self.shared_prompt or "") + data


def read_cards(html: str) -> CardReader:
    reader = CardReader()
    reader.feed(html)
    reader.close()
    return reader
