"""The routers of the ``serve-openenv`` app, one per concern: ``info`` (GET /health, /metadata,
/schema) and ``session`` (the WebSocket /ws, openenv's protocol)."""
