"""The environment runtime: ``BaseEnv`` and what runs it.

``base`` (the contract), ``config`` / ``config_loader`` (settings and the one CLI loader), ``cli``
(serve / process / evaluate), ``runner`` (serve loop), ``process``, ``evaluation``, ``sending`` and
``groups`` (group building, filtering, validation), ``spool`` (durable outbox), ``metrics_logger``
(wandb or null), ``checkpoint``, ``server_handling`` (inference backends, routing, token tracking),
``reward_fns``. The test doubles (``check_env``, the fake OpenAI server) live in
``atroposlib.testing``; ``testing`` here only re-exports them under their old path.
"""
