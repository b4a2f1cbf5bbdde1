"""``ScriptedModel``: what the fake server answers with. Completion text comes from ``responses``
(cycled) or ``responder(prompt_text, body)``, tokenized with a real tokenizer and cut at
``max_tokens`` (``"length"``) or ended with EOS (``"stop"``); it also keeps the request log, the most
generations seen running at once and the script of failures to answer next."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from atroposlib.testing.tiny_tokenizer import tiny_tokenizer_dir

Responder = Callable[[str, dict[str, Any]], str]


@dataclass
class Generation:
    """One generated completion: its token ids, their text, the finish reason."""

    ids: list[int]
    text: str
    finish: str


class ScriptedModel:
    def __init__(
        self,
        tokenizer: Any = None,
        responses: Optional[Sequence[str]] = None,
        responder: Optional[Responder] = None,
        model: str = "fake-model",
        strict_model: bool = False,
        weights_version: Optional[str] = None,
        logprob_gaps: bool = False,
    ) -> None:
        if tokenizer is None or isinstance(tokenizer, (str, Path)):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer or tiny_tokenizer_dir()))
        self.tokenizer = tokenizer
        self._cycle = itertools.cycle(
            list(responses) if responses else ["This is a fake completion."]
        )
        self.responder = responder
        self.model = model
        self.strict_model = strict_model
        self.weights_version = weights_version
        self.logprob_gaps = logprob_gaps
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._failures: list[int] = []
        self._lock = threading.Lock()

    # --- the failure script --------------------------------------------------------------------
    def fail_next(self, n: int = 1, status: int = 503) -> None:
        """The next ``n`` generation requests answer ``status``."""
        with self._lock:
            self._failures.extend([status] * n)

    def next_failure(self) -> Optional[int]:
        """The status the request being answered must fail with (taken off the script), or None."""
        with self._lock:
            return self._failures.pop(0) if self._failures else None

    # --- generation ----------------------------------------------------------------------------
    def _text_for(self, prompt_text: str, body: dict[str, Any]) -> str:
        if self.responder is not None:
            return str(self.responder(prompt_text, body))
        with self._lock:
            return next(self._cycle)

    def generate(self, prompt_text: str, body: dict[str, Any], index: int) -> Generation:
        """Choice ``index`` of the answer to ``body`` (a blocking call: routes run it in a thread)."""
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            text = self._text_for(prompt_text, {**body, "choice_index": index})
        finally:
            with self._lock:
                self.in_flight -= 1
        ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        finish = "stop"
        if max_tokens is not None and len(ids) >= int(max_tokens):
            ids, finish = ids[: int(max_tokens)], "length"
        elif self.tokenizer.eos_token_id is not None:
            ids = ids + [self.tokenizer.eos_token_id]
        shown = self.tokenizer.decode(
            ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        return Generation(ids, shown, finish)


__all__ = ["Generation", "Responder", "ScriptedModel"]
