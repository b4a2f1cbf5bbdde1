"""The ``view-run`` viewer: ``app`` (the Gradio app and its state), ``sources`` (read-only ``/peek`` of
a running API, or a JSONL file) and ``samples`` (the example groups of ``view-run --demo``)."""
