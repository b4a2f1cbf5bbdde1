"""The engine's routers, one file per concern: generation, streaming (the SSE answer of the
generation routes), weights (reload and LoRA adapters), observability (health, metrics)."""
