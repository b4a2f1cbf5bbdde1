"""HTML fragments for groups: text blocks, score colours, message lists and the token-level view.

Model- and env-provided text is shown as text, never interpreted: it goes through ``html.escape`` into
a ``<pre class="text">`` block whose CSS keeps every space and line break. So a completion containing
``<script>`` or an ``<img onerror=...>`` stays text, and a line starting with ``>`` or with spaces
reads exactly as the model wrote it (no Markdown quoting, no collapsed whitespace). A decoded
completion shows its untrained stretches (a tool's output between two assistant turns) greyed.
Used by the static report and by ``view-run``; nothing here touches files or the network.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable
from typing import Any, Optional

from atroposlib.report.groups import GroupView, SequenceView
from atroposlib.report.spans import TextSpan
from atroposlib.type_definitions import MASK_IGNORE

TokenText = Callable[[int], str]


def esc(value: Any) -> str:
    """Escape anything for HTML text or a double-quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def render_text(text: str) -> str:
    """Text as it is: escaped, every space and line break kept (``pre.text``)."""
    return f'<pre class="text">{esc(text)}</pre>'


def render_spans(spans: list[TextSpan]) -> str:
    """A decoded completion as text, its untrained stretches (masked: not trained) greyed."""
    parts = []
    for sp in spans:
        if sp.trained:
            parts.append(esc(sp.text))
        else:
            parts.append(
                f'<span class="untrained" title="not trained (masked)">{esc(sp.text)}</span>'
            )
    return f'<pre class="text">{"".join(parts)}</pre>'


def content_to_text(content: Any) -> str:
    """Message ``content`` as text: strings as is, OpenAI content parts joined, else JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict) and p.get("type") == "text":
                parts.append(str(p.get("text", "")))
            elif isinstance(p, dict) and p.get("type") in ("image_url", "image"):
                parts.append("[image]")
            else:
                parts.append(p if isinstance(p, str) else json.dumps(p, ensure_ascii=False))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False, default=str)


def fmt_score(score: Optional[float]) -> str:
    if score is None:
        return "n/a"
    return f"{score:.4g}"


def score_class(score: Optional[float]) -> str:
    """CSS class by sign, as Atropos's report: positive / negative / zero."""
    if score is None:
        return "score-none"
    if score > 0:
        return "score-pos"
    if score < 0:
        return "score-neg"
    return "score-zero"


def score_color(score: Optional[float], lo: Optional[float], hi: Optional[float]) -> str:
    """A colour from red (group minimum) to green (group maximum); grey when all scores are equal."""
    if score is None or lo is None or hi is None or hi <= lo:
        if score is not None and score > 0:
            return "hsl(120, 55%, 42%)"
        if score is not None and score < 0:
            return "hsl(0, 65%, 50%)"
        return "hsl(220, 10%, 60%)"
    t = (score - lo) / (hi - lo)
    return f"hsl({int(round(120 * t))}, 60%, 45%)"


def render_message(msg: dict[str, Any]) -> str:
    role = str(msg.get("role", "unknown"))
    role_cls = "".join(c for c in role.lower() if c.isalnum()) or "unknown"
    body = render_text(content_to_text(msg.get("content", "")))
    reward = msg.get("reward")
    reward_html = (
        f'<span class="msg-reward">reward {esc(reward)}</span>' if reward is not None else ""
    )
    return (
        f'<div class="msg role-{role_cls}"><div class="msg-role">{esc(role)}{reward_html}</div>'
        f'<div class="msg-body">{body}</div></div>'
    )


def render_messages(messages: list[dict[str, Any]]) -> str:
    return "".join(render_message(m) for m in messages)


# ----------------------------------------------------------------------------------------------
# Token-level view
# ----------------------------------------------------------------------------------------------
def logprob_color(logprob: Optional[float]) -> str:
    """Background for a trained token: probability exp(logprob) from red (unlikely) to green."""
    if logprob is None or not isinstance(logprob, (int, float)) or not math.isfinite(logprob):
        return "hsl(210, 60%, 88%)"
    p = min(1.0, max(0.0, math.exp(min(0.0, logprob))))
    return f"hsl({int(round(120 * p))}, 70%, 82%)"


def advantage_border(adv: Optional[float]) -> str:
    if adv is None or not isinstance(adv, (int, float)) or not math.isfinite(adv) or adv == 0:
        return ""
    colour = "hsl(130, 70%, 30%)" if adv > 0 else "hsl(0, 75%, 40%)"
    return f"border-bottom:3px solid {colour};"


def default_token_text(token_id: int) -> str:
    return f"[{token_id}]"


def render_token_spans(
    seq: SequenceView,
    token_text: Optional[TokenText] = None,
    start: int = 0,
    max_tokens: int = 4096,
) -> str:
    """One escaped ``<span>`` per token from ``start``: grey when masked (not trained), coloured by
    inference logprob when trained, underlined green/red by the sign of its advantage when present.
    The tooltip gives id, mask, logprob and advantage."""
    tt = token_text or default_token_text
    out: list[str] = []
    end = min(len(seq.tokens), start + max_tokens)
    for j in range(start, end):
        tid = seq.tokens[j]
        mask = seq.masks[j] if j < len(seq.masks) else MASK_IGNORE
        lp = seq.logprobs[j] if seq.logprobs and j < len(seq.logprobs) else None
        adv = seq.advantages[j] if seq.advantages and j < len(seq.advantages) else None
        trained = mask != MASK_IGNORE
        style = (f"background:{logprob_color(lp)};" if trained else "") + advantage_border(adv)
        tip = f"id {tid} | {'trained' if trained else 'masked'}"
        if lp is not None:
            tip += f" | logprob {lp:.3f}" if isinstance(lp, (int, float)) else f" | logprob {lp}"
        if adv is not None:
            tip += (
                f" | advantage {adv:.3f}"
                if isinstance(adv, (int, float))
                else f" | advantage {adv}"
            )
        cls = "tok tok-trained" if trained else "tok tok-masked"
        out.append(f'<span class="{cls}" style="{style}" title="{esc(tip)}">{esc(tt(tid))}</span>')
    if end < len(seq.tokens):
        out.append(f'<span class="tok-more">… {len(seq.tokens) - end} more tokens</span>')
    return "".join(out)


def _prompt_body(text: Optional[str], token_count: int, tokens: str) -> str:
    """A prompt as ``text`` when there is some, else a note of its ``token_count`` ``tokens``, else ''."""
    if text is not None:
        return render_text(text)
    return f'<div class="tokinfo">{token_count} {tokens}</div>' if token_count else ""


def _prompt_block(css: str, label: str, body: str) -> str:
    """A labelled prompt block around ``body`` ('' when the body is empty)."""
    return f'<div class="{css}"><div class="label">{label}</div>{body}</div>' if body else ""


def render_prompt(group: GroupView) -> str:
    """The group's prompt block when every sequence has the same prompt ('' when there is none)."""
    if group.prompt_messages:
        body = render_messages(group.prompt_messages)
    else:
        body = _prompt_body(group.prompt_text, group.prompt_token_count, "shared prompt tokens")
    return _prompt_block("prompt", "prompt (shared)", body)


def render_sequence_prompt(seq: SequenceView, group: GroupView) -> str:
    """A sequence's own prompt, shown when the group's sequences do not share one."""
    if group.prompt_shared or seq.completion_messages or seq.prompt_text == "":
        return ""
    body = _prompt_body(seq.prompt_text, seq.completion_start, "prompt tokens of its own")
    return _prompt_block("prompt seq-prompt", "prompt (this sequence)", body)


def render_sequence_body(seq: SequenceView, group: GroupView) -> str:
    """The completion of one sequence: its messages, its decoded text, or a token summary."""
    if seq.completion_messages:
        return render_messages(seq.completion_messages)
    if seq.completion_text is not None:
        return (
            '<div class="msg role-assistant completion"><div class="msg-body">'
            f"{render_spans(seq.completion_spans)}</div></div>"
        )
    if seq.tokens:
        shown = seq.tokens[seq.completion_start :][:64]
        more = len(seq.tokens) - seq.completion_start - len(shown)
        ids = " ".join(str(t) for t in shown) + (f" … (+{more})" if more > 0 else "")
        return (
            f'<div class="tokinfo">{len(seq.tokens)} tokens, {seq.trained_tokens} trained '
            f"(no messages and no tokenizer given; completion token ids below)</div>"
            f'<pre class="ids">{esc(ids)}</pre>'
        )
    return '<div class="tokinfo">empty sequence</div>'


def render_images(images: list[str]) -> str:
    """Inline data-URL images only (``groups._image_urls`` filtered them); never a remote fetch."""
    if not images:
        return ""
    tags = "".join(f'<img class="mm" alt="image {i}" src="{esc(u)}">' for i, u in enumerate(images))
    return f'<div class="images">{tags}</div>'


__all__ = [
    "advantage_border",
    "content_to_text",
    "default_token_text",
    "esc",
    "fmt_score",
    "logprob_color",
    "render_images",
    "render_message",
    "render_messages",
    "render_prompt",
    "render_sequence_body",
    "render_sequence_prompt",
    "render_spans",
    "render_text",
    "render_token_spans",
    "score_class",
    "score_color",
]
