"""The managed-server proxy: an OpenAI-compatible HTTP front whose sessions record every generation
token-exactly (Atropos's ``managed_server_proxy``; that module path re-exports from here), so that
agent programs someone else wrote train unmodified (docs/interop.md, "Bring your own agent").

``app.py`` builds the app (``create_app``); ``state.py`` holds what the routes share (the server
manager, the tokenizer, the settings of ``settings.py``, the session store of ``sessions.py``, the
counts), reached through ``deps.py``; ``routes/`` has one router per concern; ``protocol.py`` the
request bodies; ``request_translation.py`` turns an OpenAI request into the managed server's call (or
the 4xx naming what cannot be served), ``reply_translation.py`` its answer back (tool calls, usage,
logprobs) and ``streaming.py`` into server-sent events; ``recording.py`` takes back what a client did
not receive; ``servers.py`` picks the backend server a session runs on; ``auth.py`` is the key;
``http.py`` the error body; ``responses.py`` and ``openapi.py`` the schema's statuses; ``serve.py``
what ``atropos-proxy`` builds from its settings.
"""
