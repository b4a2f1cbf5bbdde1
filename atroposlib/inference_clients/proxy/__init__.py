"""The managed-server proxy: an OpenAI-compatible HTTP front whose sessions record every generation
token-exactly (Atropos's ``managed_server_proxy``; that module path re-exports from here).

``app.py`` builds the app (``create_app``); ``state.py`` holds what the routes share (the server
manager, the tokenizer, the session store of ``sessions.py``), reached through ``deps.py``;
``routes/`` has one router per concern; ``protocol.py`` the request bodies; ``request_translation.py``
and ``reply_translation.py`` turn an OpenAI request into the managed server's call and its answer
back; ``servers.py`` picks the backend server a session runs on; ``http.py`` is the error body.
"""
