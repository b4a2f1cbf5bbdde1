"""What the tools share: ``groups`` (reading groups and the display model), ``selection`` (which
sequences an SFT/DPO export keeps) and ``tokenizer`` (the tools' tokenizer and decoders).

The tools themselves live in ``atroposlib.report``, ``atroposlib.datagen`` and ``atroposlib.viewer``;
``frontend.report``, ``render``, ``jsonl2html``, ``datagen``, ``datagen_cli``, ``viewer``, ``sources``
and ``samples`` are their old paths (each is the moved module itself), kept so imports keep working
(``frontend.jsonl2html`` is Atropos's path).
"""
