"""A sequence's tokens decoded into stretches of text that join back to the whole decoded text.

``decoded_spans(ids, masks, decode)`` cuts a sequence where its masks change between trained and not
trained (the prompt, each assistant turn, each tool output between them) and decodes each stretch.
``split_text(ids, cut, decode)`` cuts it once (a prompt and the rest).

A cut never splits a character. A byte-level tokenizer may spread one character (an emoji, an
accented letter) over several tokens, and decoding each side of a cut between them gives U+FFFD on
both sides. So a cut moves to the nearest token boundary where the decoded text splits cleanly: the
text decoded up to it is a prefix of the whole text. Between a trained and an untrained stretch the
character goes to the trained side (some of its bytes were trained). Every stretch's text is a slice of
``decode(ids)``, so the stretches join back to it exactly. A tokenizer whose decoding of a prefix is
not a prefix of the whole (no clean boundary near a cut) gets its stretches decoded one by one.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

from atroposlib.type_definitions import MASK_IGNORE

Decoder = Callable[[list[int]], str]

MAX_SHIFT = 8
"""How many tokens a cut may move to reach a clean boundary (a character is at most 4 bytes)."""


@dataclass(frozen=True)
class TextSpan:
    """Tokens ``start`` to ``end`` (exclusive) of a sequence, their text, and whether they were trained."""

    text: str
    trained: bool
    start: int
    end: int


class _Decoded:
    """The decoded text of a sequence and, per token boundary, where it falls in that text."""

    def __init__(self, ids: Sequence[int], decode: Decoder) -> None:
        self.ids = list(ids)
        self.decode = decode
        self.full = decode(self.ids)
        self._offsets: dict[int, Optional[int]] = {0: 0, len(self.ids): len(self.full)}
        self._clean = [0]  # sorted boundaries known to split cleanly (anchors)

    def offset(self, p: int) -> Optional[int]:
        """Where boundary ``p`` falls in the text, or None when the text does not split cleanly there.
        Decodes only from the nearest clean boundary before ``p`` when the tokenizer decodes
        pieces that join (byte-level BPE); else the whole prefix (SentencePiece drops a piece's
        leading space)."""
        if p in self._offsets:
            return self._offsets[p]
        a = self._clean[bisect.bisect_left(self._clean, p) - 1]
        start = self._offsets[a]
        assert start is not None
        piece = self.decode(self.ids[a:p])
        if self.full.startswith(piece, start):
            off: Optional[int] = start + len(piece)
        else:
            head = self.decode(self.ids[:p])
            off = len(head) if self.full.startswith(head) else None
        self._offsets[p] = off
        if off is not None:
            bisect.insort(self._clean, p)
        return off

    def clean_point(self, p: int, step: int, lo: int, hi: int) -> int:
        """The first clean boundary from ``p`` going by ``step`` (-1 or 1) within ``lo``..``hi``;
        ``p`` itself when there is none within ``MAX_SHIFT`` tokens."""
        for k in range(MAX_SHIFT + 1):
            q = p + step * k
            if q < lo or q > hi:
                break
            if self.offset(q) is not None:
                return q
        return p

    def text(self, a: int, b: int) -> str:
        """The text of tokens ``a`` to ``b``: a slice of the whole when both boundaries are clean."""
        oa, ob = self.offset(a), self.offset(b)
        if oa is not None and ob is not None:
            return self.full[oa:ob]
        return self.decode(self.ids[a:b])


def _trained_flags(masks: Sequence[int], n: int) -> list[bool]:
    flags = [m != MASK_IGNORE for m in masks[:n]]
    return flags + [False] * (n - len(flags))


def decoded_spans(ids: Sequence[int], masks: Sequence[int], decode: Decoder) -> list[TextSpan]:
    """The sequence as alternating untrained / trained stretches of text (see the module doc).
    A token without a mask counts as untrained."""
    n = len(ids)
    if n == 0:
        return []
    flags = _trained_flags(masks, n)
    raw = [j for j in range(1, n) if flags[j] != flags[j - 1]]
    dec = _Decoded(ids, decode)
    bounds = [0]
    for i, j in enumerate(raw):
        nxt = raw[i + 1] if i + 1 < len(raw) else n
        # into a trained stretch: move back; out of one: move forward (the character is trained)
        bounds.append(dec.clean_point(j, -1 if flags[j] else 1, bounds[-1], nxt))
    bounds.append(n)
    spans: list[TextSpan] = []
    for i in range(len(bounds) - 1):
        a, b = bounds[i], bounds[i + 1]
        if a >= b:
            continue
        trained = flags[raw[i - 1]] if i > 0 else flags[0]
        text = dec.text(a, b)
        if spans and spans[-1].trained == trained:  # a stretch in between vanished: join
            last = spans.pop()
            spans.append(TextSpan(last.text + text, trained, last.start, b))
        else:
            spans.append(TextSpan(text, trained, a, b))
    return spans


def split_text(ids: Sequence[int], cut: int, decode: Decoder) -> tuple[str, str, int]:
    """(text before, text from, the cut used): ``cut`` moved back to a clean boundary if needed."""
    dec = _Decoded(ids, decode)
    cut = max(0, min(cut, len(dec.ids)))
    p = dec.clean_point(cut, -1, 0, len(dec.ids))
    return dec.text(0, p), dec.text(p, len(dec.ids)), p


def prompt_and_completion(spans: Sequence[TextSpan]) -> tuple[str, list[TextSpan]]:
    """The untrained text before the first trained stretch, and the stretches from it on."""
    if spans and not spans[0].trained:
        return spans[0].text, list(spans[1:])
    return "", list(spans)


__all__ = ["MAX_SHIFT", "TextSpan", "decoded_spans", "prompt_and_completion", "split_text"]
