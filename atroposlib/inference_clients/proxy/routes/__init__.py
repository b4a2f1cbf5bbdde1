"""The proxy's routers, one file per concern: status (health, the backend servers), models,
sessions (open, list, recorded nodes, close) and chat (completions and the rendered prompt).
Their answers are plain dicts in OpenAI's shapes (``response_model=None``: serialized as they are)."""
