"""Atropos's ``atroposlib.frontend.jsonl2html`` names over our HTML report (``report.html``).

``generate_html(input_path, output_path=None)`` writes the report of a JSONL groups file (default:
next to it, ``.html``) and returns its path; ``create_html_for_group(group, index)`` is one group's
escaped HTML card.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from atroposlib.report.html import safe_render_group, write_html_report


def create_html_for_group(group_data: dict[str, Any], index: int) -> str:
    return safe_render_group(group_data, index)


def generate_html(input_path: str, output_path: Optional[str] = None) -> Optional[str]:
    src = Path(input_path)
    if not src.is_file():
        raise FileNotFoundError(f"input file not found: {src}")
    out = Path(output_path) if output_path else src.with_suffix(".html")
    return str(write_html_report(src, out, title=f"Rollouts - {src.name}"))


__all__ = ["create_html_for_group", "generate_html"]
