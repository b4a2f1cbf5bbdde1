"""The HTML report of scored groups: ``html`` (``write_html_report``, one self-contained page) and
``render`` (escaped HTML fragments: text, messages, token spans, images), ``spans`` (decoded
trained / untrained stretches that never split a character). Atropos's
``generate_html`` / ``create_html_for_group`` names over it are ``atroposlib.frontend.jsonl2html``."""
