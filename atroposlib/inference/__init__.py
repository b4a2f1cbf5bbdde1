"""The CPU inference engine (an OpenAI-compatible, batching server over a local transformers model) and
the offline model builders (tiny Llama + BPE tokenizer, SmolLM2 GGUF import). See docs/inference.md.

Importing this package imports nothing heavy; torch is loaded by the submodules that need it.
"""
