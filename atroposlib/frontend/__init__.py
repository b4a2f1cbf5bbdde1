"""What the tools share: ``groups`` (reading groups and the display model), ``selection`` (which
sequences an SFT/DPO export keeps) and ``tokenizer`` (the tools' tokenizer and decoders); and
``jsonl2html``, Atropos's module path for ``generate_html`` / ``create_html_for_group``.

The tools themselves live in ``atroposlib.report``, ``atroposlib.datagen`` and ``atroposlib.viewer``.
"""
