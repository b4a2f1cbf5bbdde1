"""A JSONL file of scored groups as one escaped HTML page, under Atropos's names and module path.

``generate_html(input_path, output_path=None)`` writes the report of a JSONL groups file (default:
next to it, ``.html``) and returns its path; ``create_html_for_group(group, index)`` is one group's
escaped HTML card. The page itself is ``atroposlib.report.html``; the console script
``atropos-jsonl2html`` (``atroposlib.cli.jsonl2html``) parses its flags and calls ``generate_html``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from atroposlib.report.groups import LoadStats
from atroposlib.report.html import safe_render_group, write_html_report


def create_html_for_group(group_data: dict[str, Any], index: int) -> str:
    return safe_render_group(group_data, index)


def default_output_path(input_path: str) -> Path:
    """Where ``generate_html`` writes when no output is given: the input path with ``.html``."""
    return Path(input_path).with_suffix(".html")


def generate_html(
    input_path: str,
    output_path: Optional[str] = None,
    *,
    title: Optional[str] = None,
    tokenizer: Optional[str] = None,
    token_view: bool = False,
    max_groups: Optional[int] = None,
    stats: Optional[LoadStats] = None,
) -> str:
    """Write the report of ``input_path`` and return the written path. ``tokenizer`` decodes groups
    without messages; ``token_view`` adds per-token spans; skipped lines are counted in ``stats``."""
    src = Path(input_path)
    if not src.is_file():
        raise FileNotFoundError(f"input file not found: {src}")
    out = Path(output_path) if output_path else default_output_path(input_path)
    return str(
        write_html_report(
            src,
            out,
            title=title or f"Rollouts - {src.name}",
            tokenizer=tokenizer,
            token_view=token_view,
            max_groups=max_groups,
            stats=stats,
        )
    )


__all__ = ["create_html_for_group", "default_output_path", "generate_html"]
