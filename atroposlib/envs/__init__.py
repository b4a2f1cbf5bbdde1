"""The environment runtime: ``BaseEnv`` and what runs it.

``base`` (the contract), ``config`` / ``config_loader`` (settings and the one CLI loader), ``cli``
(serve / process / evaluate), ``runner`` (serve loop), ``process``, ``evaluation``, ``sending`` and
``groups`` (group building, filtering, validation), ``spool`` (durable outbox), ``metrics_logger``
(wandb or null), ``checkpoint``, ``server_handling`` (inference backends, routing, token tracking),
``reward_fns``, ``testing`` / ``fake_server`` (check_env and a real-HTTP fake OpenAI server).
"""
