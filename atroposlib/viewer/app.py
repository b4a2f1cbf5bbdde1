"""``view-run``: a Gradio page over a run's recent groups, read-only.

``render_view`` (pure, tested without a browser) turns fetched groups into escaped HTML: filters by env
and score, newest first, each group with its prompt (once when every sequence has the same one, else
each sequence's own), completions shown as text, scores, env name and policy version, and a
token-level view where every completion token is coloured by its mask and inference
logprob and underlined by the sign of its advantage. ``build_app`` wires it into Gradio: env dropdown,
score range, group limit, token-view toggle, refresh button and optional auto-refresh.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Optional

from atroposlib.errors import AtroposError
from atroposlib.report.groups import Decoder, build_view
from atroposlib.report.html import CARD_CSS, error_card, render_group
from atroposlib.report.render import esc, logprob_color
from atroposlib.viewer.sources import GroupSource

log = logging.getLogger(__name__)

ALL_ENVS = "all envs"
TOKEN_BUDGET = 40_000  # completion tokens rendered as spans per page

VIEW_CSS = (
    CARD_CSS
    + """
#atv-groups { max-height:none; }
"""
)


def legend_html() -> str:
    """What the token colours mean."""
    return (
        '<div class="legend">Tokens: '
        f'<span class="tok tok-trained" style="background:{logprob_color(0.0)}">likely (logprob 0)</span> '
        f'<span class="tok tok-trained" style="background:{logprob_color(-0.7)}">p = 0.5</span> '
        f'<span class="tok tok-trained" style="background:{logprob_color(-5.0)}">unlikely</span> '
        '<span class="tok tok-masked">masked (not trained)</span> '
        '<span class="tok tok-trained" style="border-bottom:3px solid hsl(130, 70%, 30%)">advantage &gt; 0</span> '
        '<span class="tok tok-trained" style="border-bottom:3px solid hsl(0, 75%, 40%)">advantage &lt; 0</span>'
        " · hover a token for its id, logprob and advantage</div>"
    )


def env_names(groups: list[dict[str, Any]]) -> list[str]:
    """Sorted env labels seen in ``groups`` (name, else ``env <id>``)."""
    names = set()
    for g in groups:
        if g.get("env_name"):
            names.add(str(g["env_name"]))
        elif g.get("env_id") is not None:
            names.add(f"env {g['env_id']}")
    return sorted(names)


def render_view(
    groups: list[dict[str, Any]],
    *,
    env: Optional[str] = None,
    min_score: Optional[float] = None,
    max_score: Optional[float] = None,
    decode: Optional[Decoder] = None,
    token_text: Optional[Callable[[int], str]] = None,
    token_view: bool = True,
    banner: str = "",
    token_budget: int = TOKEN_BUDGET,
) -> tuple[str, int]:
    """HTML of the groups that pass the filters (newest first) and how many passed.
    ``min_score``/``max_score`` bound the group's mean score. The token view is given to the newest
    groups until ``token_budget`` completion tokens are on the page (a browser stays responsive)."""
    cards: list[str] = []
    budget_left = token_budget
    over_budget = 0
    for i, g in reversed(list(enumerate(groups))):
        index = g.get("seq", i) if isinstance(g.get("seq"), int) else i
        try:
            view = build_view(g, index=index, decode=decode)
        except Exception as e:  # noqa: BLE001 - one malformed group must not hide the others
            log.exception("group %s could not be rendered", index)
            cards.append(error_card(index, e))
            continue
        if env and env != ALL_ENVS and view.env_label != env:
            continue
        mean = view.mean_score
        if min_score is not None and (mean is None or mean < min_score):
            continue
        if max_score is not None and (mean is None or mean > max_score):
            continue
        n_tokens = sum(max(0, len(q.tokens) - q.completion_start) for q in view.sequences)
        with_tokens = token_view and n_tokens <= budget_left
        if with_tokens:
            budget_left -= n_tokens
        elif token_view:
            over_budget += 1
        cards.append(
            render_group(
                view,
                token_text=token_text,
                token_view=with_tokens,
                open_=not cards,
                tokens_open=True,
            )
        )
    if over_budget:
        note = (
            f"token view left out for {over_budget} older groups ({token_budget} tokens per page); "
            "filter or lower 'Latest N groups' to see theirs"
        )
        banner = f"{banner}; {note}" if banner else note
    head = f'<div class="banner">{esc(banner)}</div>' if banner else ""
    if cards:
        body = "".join(cards)
    elif groups:
        body = f'<div class="empty">No groups match the filters ({len(groups)} fetched).</div>'
    else:
        body = '<div class="empty">No groups yet: the source has none to show.</div>'
    legend = legend_html() if token_view else ""
    return f'<div class="atv" id="atv-root">{head}{legend}{body}</div>', len(cards)


def parse_bound(v: Any, name: str) -> tuple[Optional[float], str]:
    """(number or None, problem): empty means no bound; text that is not a number is a problem."""
    if v is None or (isinstance(v, str) and not v.strip()):
        return None, ""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None, f"{name} {str(v)!r} is not a number; ignored"
    if x != x:
        return None, f"{name} is NaN; ignored"
    return x, ""


class ViewerState:
    """Fetches from the source and renders; errors become a banner, never a crash."""

    def __init__(
        self,
        source: GroupSource,
        decode: Optional[Decoder] = None,
        token_text: Optional[Callable[[int], str]] = None,
    ) -> None:
        self.source = source
        self.decode = decode
        self.token_text = token_text
        self.errors = 0

    def refresh(
        self, env: Optional[str], min_score: Any, max_score: Any, limit: Any, token_view: bool
    ) -> tuple[str, str, list[str]]:
        """(groups HTML, status markdown, env choices)."""
        try:
            n = int(limit) if limit else 20
        except (TypeError, ValueError):
            n = 20
        try:
            groups = self.source.fetch(n)
            status = self.source.status_line()
        except Exception as e:  # noqa: BLE001 - shown on the page; the server keeps serving
            self.errors += 1
            if isinstance(e, (AtroposError, OSError)):
                log.warning("view-run: fetching from %s failed: %s", self.source.description, e)
            else:
                log.exception("view-run: unexpected error reading %s", self.source.description)
            html, _ = render_view([], banner=f"Could not read {self.source.description}: {e}")
            return html, f"**Source:** {self.source.description} — error", [ALL_ENVS]
        lo, problem_lo = parse_bound(min_score, "min score")
        hi, problem_hi = parse_bound(max_score, "max score")
        html, shown = render_view(
            groups,
            env=env,
            min_score=lo,
            max_score=hi,
            decode=self.decode,
            token_text=self.token_text,
            token_view=bool(token_view),
            banner="; ".join(p for p in (problem_lo, problem_hi) if p),
        )
        md = (
            f"**Source:** {self.source.description} · {status} · "
            f"showing {shown} of {len(groups)} fetched groups"
        )
        return html, md, [ALL_ENVS, *env_names(groups)]


def build_app(
    state: ViewerState, title: str = "Atropos run viewer", refresh_seconds: float = 0.0
) -> Any:
    """The Gradio Blocks app (not launched)."""
    import gradio as gr

    with gr.Blocks(title=title) as demo:
        gr.Markdown(f"## {title}")
        status = gr.Markdown("loading…", elem_id="atv-status")
        with gr.Row():
            env = gr.Dropdown(
                choices=[ALL_ENVS],
                value=ALL_ENVS,
                label="Environment",
                elem_id="atv-env",
                allow_custom_value=True,
            )
            min_score = gr.Textbox(
                value="", placeholder="any", label="Min mean score", elem_id="atv-min"
            )
            max_score = gr.Textbox(
                value="", placeholder="any", label="Max mean score", elem_id="atv-max"
            )
            limit = gr.Number(
                value=20,
                precision=0,
                minimum=1,
                maximum=1000,
                label="Latest N groups",
                elem_id="atv-limit",
            )
            token_view = gr.Checkbox(value=True, label="Token view", elem_id="atv-tokens")
            refresh = gr.Button("Refresh", variant="primary", elem_id="atv-refresh")
        out = gr.HTML(value="", elem_id="atv-groups", js_on_load=None, apply_default_css=False)

        def do_refresh(env_v, lo, hi, lim, tv):
            html, md, choices = state.refresh(env_v, lo, hi, lim, tv)
            value = env_v if env_v in choices else ALL_ENVS
            return html, md, gr.Dropdown(choices=choices, value=value)

        inputs = [env, min_score, max_score, limit, token_view]
        outputs = [out, status, env]
        refresh.click(do_refresh, inputs, outputs)
        demo.load(do_refresh, inputs, outputs)
        for comp in (env, token_view):  # .input: user changes only, not our own updates
            comp.input(do_refresh, inputs, outputs)
        for comp in (min_score, max_score, limit):
            comp.submit(do_refresh, inputs, outputs)
        if refresh_seconds and refresh_seconds > 0:
            timer = gr.Timer(value=refresh_seconds)
            timer.tick(do_refresh, inputs, outputs)
    return demo


def launch_theme() -> Any:
    """A theme that uses local system fonts (no font download from the page)."""
    import gradio as gr

    return gr.themes.Default(
        font=["system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"]
    )


__all__ = [
    "ALL_ENVS",
    "VIEW_CSS",
    "ViewerState",
    "build_app",
    "env_names",
    "launch_theme",
    "legend_html",
    "parse_bound",
    "render_view",
]
