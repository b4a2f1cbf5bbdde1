"""SFT/DPO data generation from scored groups: ``export`` (``run_datagen`` over a JSONL file or a live
API) and ``cli`` (the ``atropos-sft-gen`` / ``atropos-dpo-gen`` entry point)."""
