"""The HTML report of scored groups: ``html`` (``write_html_report``, one self-contained page) and
``render`` (escaped HTML fragments: markdown, messages, token spans, images). Atropos's
``generate_html`` / ``create_html_for_group`` names over it are ``atroposlib.frontend.jsonl2html``."""
