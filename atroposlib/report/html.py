"""Self-contained HTML report of scored groups (the ``jsonl2html`` of Atropos, made safe).

``write_html_report(groups, out_path, title=...)`` writes one page with inline CSS and JS (no CDN, no
remote fetch): one collapsible ``<details>`` per group, score-coloured, the prompt once when every
sequence has the same one (else each sequence's own), each completion as escaped text with its
whitespace kept, a search box and an env filter. A
Content-Security-Policy meta tag allows only the page's own script (by nonce), so even a rendering bug
could not run a script that came from model output. Groups are streamed to the file one at a time.
"""

from __future__ import annotations

import logging
import secrets
import time
from pathlib import Path
from typing import Any, Optional, Union

from atroposlib.report.groups import GroupsInput, GroupView, LoadStats, build_view, iter_groups
from atroposlib.report.render import (
    esc,
    fmt_score,
    render_images,
    render_prompt,
    render_sequence_body,
    render_sequence_prompt,
    render_token_spans,
    score_class,
    score_color,
)
from atroposlib.report.tokenizer import make_decoder, make_token_text, optional_tokenizer

PAGE_CSS = """
body { margin:0; font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif; background:#f6f7f9; color:#1d2330; }
header { position:sticky; top:0; z-index:2; background:#1d2330; color:#fff; padding:10px 18px; display:flex; gap:14px; align-items:center; flex-wrap:wrap; }
header h1 { font-size:17px; margin:0 12px 0 0; }
header input, header select, header button { font:inherit; padding:5px 8px; border-radius:6px; border:1px solid #9aa3b2; }
header input { width:280px; }
header .stats { color:#c9d1de; font-size:13px; }
main { padding:14px 18px; max-width:1200px; margin:0 auto; }
"""

CARD_CSS = """
.atv, .atv * { box-sizing:border-box; }
.atv { --atv-muted:#6b7280; --atv-line:#e3e6eb; color:#1d2330; font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif; }
.atv details.group { background:#fff; border:1px solid var(--atv-line); border-left:6px solid var(--gc,#999); border-radius:8px; margin:0 0 10px; }
.atv details.group > summary { cursor:pointer; padding:9px 12px; display:flex; gap:12px; align-items:center; flex-wrap:wrap; list-style:none; }
.atv details.group > summary::-webkit-details-marker { display:none; }
.atv details.group > summary::before { content:"\\25B8"; color:var(--atv-muted); }
.atv details.group[open] > summary::before { content:"\\25BE"; }
.atv .gtitle { font-weight:600; }
.atv .pill { font-size:12px; padding:1px 8px; border-radius:10px; background:#eef1f5; color:#374151; }
.atv .pill.score { color:#fff; }
.atv .gbody { padding:4px 14px 12px; border-top:1px solid var(--atv-line); }
.atv .prompt { background:#f3f5f8; border-radius:6px; padding:6px 10px; margin:8px 0; }
.atv .label { font-size:12px; color:var(--atv-muted); text-transform:uppercase; letter-spacing:.04em; }
.atv .seq { border:1px solid var(--atv-line); border-left:5px solid var(--sc,#999); border-radius:6px; margin:8px 0; padding:6px 10px; }
.atv .seq.score-pos { background:#f3fbf4; } .atv .seq.score-neg { background:#fdf4f4; } .atv .seq.score-zero { background:#fafafa; }
.atv .seqhead { display:flex; gap:10px; align-items:center; flex-wrap:wrap; }
.atv .msg { margin:6px 0; }
.atv .msg-role { font-size:12px; font-weight:600; color:#4b5563; }
.atv .msg-reward { margin-left:8px; font-weight:400; color:var(--atv-muted); }
.atv .msg-body { overflow-x:auto; }
.atv pre.text { white-space:pre-wrap; overflow-wrap:anywhere; margin:4px 0; font:13px/1.45 ui-monospace,SFMono-Regular,Menlo,monospace; }
.atv pre.text .untrained { color:#6b7280; background:#eef1f5; }
.atv pre.ids { white-space:pre-wrap; word-break:break-all; font-size:12px; color:#374151; }
.atv .tokinfo { color:var(--atv-muted); font-size:12px; }
.atv details.tokview > summary { cursor:pointer; color:#374151; font-size:12px; }
.atv .tokens { font:12px/2 ui-monospace,SFMono-Regular,Menlo,monospace; white-space:pre-wrap; word-break:break-all; padding:2px 0 4px; }
.atv .tok { padding:1px 1px; margin-right:1px; border-radius:2px; color:#111827; } .atv .tok-masked { color:#9ca3af; } .atv .tok-more { color:var(--atv-muted); }
.atv .images img.mm { max-width:280px; max-height:280px; margin:4px; border:1px solid var(--atv-line); }
.atv .legend { font-size:12px; color:#374151; margin:4px 0 10px; }
.atv .legend .tok { padding:1px 4px; }
.atv .banner { padding:8px 12px; border-radius:6px; background:#fff4e5; border:1px solid #f0c36d; margin:0 0 10px; }
.atv .empty { color:var(--atv-muted); padding:30px; text-align:center; }
.hidden { display:none !important; }
"""

CSS = PAGE_CSS + CARD_CSS

log = logging.getLogger(__name__)

JS = """
(function () {
  var q = document.getElementById('q'), envSel = document.getElementById('env');
  var groups = Array.prototype.slice.call(document.querySelectorAll('details.group'));
  var shown = document.getElementById('shown');
  var envs = {};
  groups.forEach(function (g) { envs[g.getAttribute('data-env')] = 1; });
  Object.keys(envs).sort().forEach(function (e) {
    var o = document.createElement('option'); o.value = e; o.textContent = e; envSel.appendChild(o);
  });
  function apply() {
    var needle = q.value.trim().toLowerCase(), env = envSel.value, n = 0;
    groups.forEach(function (g) {
      var ok = (!env || g.getAttribute('data-env') === env) &&
               (!needle || g.textContent.toLowerCase().indexOf(needle) !== -1);
      g.classList.toggle('hidden', !ok); if (ok) n++;
    });
    shown.textContent = n + ' of ' + groups.length + ' groups shown';
  }
  q.addEventListener('input', apply); envSel.addEventListener('change', apply);
  document.getElementById('expand').addEventListener('click', function () {
    groups.forEach(function (g) { if (!g.classList.contains('hidden')) g.open = true; });
  });
  document.getElementById('collapse').addEventListener('click', function () {
    groups.forEach(function (g) { g.open = false; });
  });
  apply();
})();
"""


def render_group(
    view: GroupView,
    token_text: Optional[Any] = None,
    token_view: bool = False,
    open_: bool = False,
    tokens_open: bool = False,
) -> str:
    """One collapsible group card. ``token_view`` adds the coloured completion tokens per sequence."""
    lo, hi = view.min_score, view.max_score
    meta = [f'<span class="pill">{esc(view.env_label)}</span>'] if view.env_label else []
    if view.policy_version is not None:
        meta.append(f'<span class="pill">policy v{esc(view.policy_version)}</span>')
    meta.append(f'<span class="pill">{len(view.sequences)} seqs</span>')
    meta.append(
        f'<span class="pill score" style="background:{score_color(hi, None, None)}">'
        f"max {esc(fmt_score(hi))}</span>"
        f'<span class="pill">mean {esc(fmt_score(view.mean_score))}</span>'
        f'<span class="pill">min {esc(fmt_score(lo))}</span>'
    )
    if view.state:
        meta.append(f'<span class="pill state">{esc(view.state)}</span>')
    if view.received_at:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(view.received_at))
        meta.append(f'<span class="pill">{esc(when)}</span>')
    if view.group_id:
        meta.append(f'<span class="pill">id {esc(view.group_id)}</span>')
    if view.sequences and view.sequences[0].reward_status == "unavailable":
        meta.append('<span class="pill">reward unavailable</span>')

    parts = [render_prompt(view), render_images(view.images)]
    for seq in view.sequences:
        colour = score_color(seq.score, lo, hi)
        tokens_html = ""
        if token_view and seq.tokens:
            spans = render_token_spans(seq, token_text, start=seq.completion_start)
            tokens_html = f'<details class="tokview"{" open" if tokens_open else ""}><summary>completion tokens</summary><div class="tokens">{spans}</div></details>'
        parts.append(
            f'<div class="seq {score_class(seq.score)}" style="--sc:{colour}" data-score="{esc(seq.score)}">'
            f'<div class="seqhead"><span class="label">completion {seq.index}</span>'
            f'<span class="pill score" style="background:{colour}">score {esc(fmt_score(seq.score))}</span>'
            f'<span class="tokinfo">{len(seq.tokens)} tokens, {seq.trained_tokens} trained</span></div>'
            f"{render_sequence_prompt(seq, view)}{render_sequence_body(seq, view)}{tokens_html}</div>"
        )
    title = f"Group #{view.seq}" if view.seq is not None else f"Group {view.index}"
    return (
        f'<details class="group" data-env="{esc(view.env_label)}" data-max-score="{esc(hi)}"'
        f' style="--gc:{score_color(hi, None, None)}"{" open" if open_ else ""}>'
        f'<summary><span class="gtitle">{esc(title)}</span>{"".join(meta)}</summary>'
        f'<div class="gbody">{"".join(parts)}</div></details>\n'
    )


def error_card(index: Any, err: Exception) -> str:
    """A card that says a group could not be shown (the rest of the page still renders)."""
    return (
        f'<details class="group" data-env="unreadable" style="--gc:#999"><summary><span class="gtitle">'
        f'Group {esc(index)}</span><span class="pill">could not be shown: {esc(type(err).__name__)}: '
        f"{esc(str(err)[:300])}</span></summary></details>\n"
    )


def safe_render_group(group: dict, index: int, *, decode: Any = None, **kwargs: Any) -> str:
    """``render_group(build_view(group))``; a malformed group becomes an error card, logged with
    its traceback, instead of breaking the whole page."""
    try:
        return render_group(build_view(group, index=index, decode=decode), **kwargs)
    except Exception as e:  # noqa: BLE001 - one bad group must not hide the others
        log.exception("group %s could not be rendered", index)
        return error_card(index, e)


def _page_head(title: str, nonce: str) -> str:
    csp = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'nonce-{nonce}'; base-uri 'none'; form-action 'none'"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{esc(title)}</title><style>{CSS}</style></head><body class="atv">'
        f"<header><h1>{esc(title)}</h1>"
        '<input id="q" type="search" placeholder="Search prompts and completions…" aria-label="search">'
        '<select id="env" aria-label="environment"><option value="">all envs</option></select>'
        '<button id="expand" type="button">expand all</button>'
        '<button id="collapse" type="button">collapse all</button>'
        '<span class="stats" id="shown"></span></header><main id="groups">\n'
    )


def write_html_report(
    groups: GroupsInput,
    out_path: Union[str, Path],
    title: str = "Atropos rollouts",
    *,
    tokenizer: Optional[Any] = None,
    token_view: bool = False,
    max_groups: Optional[int] = None,
    stats: Optional[LoadStats] = None,
    env_name: Optional[str] = None,
) -> Path:
    """Write the report and return its path.

    ``groups``: an iterable of group dicts (``ScoredDataGroup`` shape, or ``/peek`` records) or the
    path of a JSONL file of groups. ``tokenizer``: a tokenizer object or a name/dir to load, used to
    decode groups that carry no ``messages``. ``token_view`` adds per-token spans (larger files).
    Unreadable JSONL lines are logged and counted in ``stats``. ``env_name`` labels the groups that
    carry neither ``env_name`` nor ``env_id`` (``process`` passes its env's name)."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tok = optional_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    decode = make_decoder(tok) if tok is not None else None
    token_text = make_token_text(tok) if tok is not None else None
    nonce = secrets.token_urlsafe(16)
    tmp = out.with_name(out.name + ".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(_page_head(title, nonce))
        for i, group in enumerate(iter_groups(groups, stats)):
            if max_groups is not None and count >= max_groups:
                break
            if env_name and not group.get("env_name") and group.get("env_id") is None:
                group = {**group, "env_name": env_name}
            fh.write(
                safe_render_group(
                    group,
                    i,
                    decode=decode,
                    token_text=token_text,
                    token_view=token_view,
                    open_=(i == 0),
                )
            )
            count += 1
        if count == 0:
            fh.write('<div class="empty">No groups to show.</div>')
        fh.write(f'</main><script nonce="{nonce}">{JS}</script></body></html>\n')
    tmp.replace(out)
    return out


__all__ = ["error_card", "render_group", "safe_render_group", "write_html_report"]
