"""The fake OpenAI-compatible server of the tests (``FakeOpenAIServer``; ``atroposlib.testing`` and
the old module path ``atroposlib.testing.fake_server`` re-export it).

``server.py`` runs it (uvicorn in a thread on a free loopback port); ``scripted_model.py`` is what it
answers with (scripted text on a real tokenizer, the request log, the failure script);
``app.py`` builds the FastAPI app over it, with one router per concern in ``routes/`` (state through
``deps.py``); ``refusals.py`` the answers given instead of generating; ``logprobs.py`` the
deterministic logprobs and their OpenAI / vLLM / SGLang shapes.
"""
