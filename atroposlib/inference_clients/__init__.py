"""Inference clients: how environments talk to inference servers, and how the trainer refreshes them.

* ``config``: ``APIServerConfig`` / ``ServerBaseline`` (one server, or servers without addresses),
  ``ReasoningConfig``;
* ``backend``: ``APIServer``, the interface every backend implements (limits, retries, health,
  timings), with its helpers ``answers``, ``limits``, ``logprobs``; ``weight_routes``: the interface
  through which a backend's server takes new weights (reload from disk, LoRA);
* ``backends/``: one module per backend (``openai``, ``vllm``, ``sglang``, ``trl_vllm``, ``engine``
  = our CPU engine, ``scripted`` = the in-process ``--testing`` backend);
* ``registry``: ``server_type`` -> backend class, the one place a backend is registered;
* ``server_manager``: ``ServerManager``, routing and failover over many servers;
* ``managed_server``: token-exact tracking of generations; ``managed_server_proxy``: an
  OpenAI-compatible HTTP front for it; ``tool_call_translator``: OpenAI ``tool_calls`` <-> Hermes text.

Atropos's module paths for these names are ``atroposlib.envs.server_handling.*`` (thin re-exports).
This package imports nothing from the env runtime, the API or the trainer.
"""
