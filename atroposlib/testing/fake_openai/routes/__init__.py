"""The fake server's routers, one file per concern: health, models, weights (vLLM dev mode's
version routes), completions, chat and sglang (SGLang's native ``/generate``)."""
