"""The HTML report of scored groups: ``html`` (``write_html_report``, one self-contained page),
``render`` (escaped HTML fragments: markdown, messages, token spans, images) and ``jsonl2html``
(Atropos's ``generate_html`` / ``create_html_for_group`` names over it)."""
