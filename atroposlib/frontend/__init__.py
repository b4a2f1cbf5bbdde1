"""Atropos's module path ``atroposlib.frontend.jsonl2html`` (``generate_html``,
``create_html_for_group``), nothing else: the report lives in ``atroposlib.report``, the exporters in
``atroposlib.datagen``, view-run in ``atroposlib.viewer``."""
