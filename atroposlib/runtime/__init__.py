"""What runs an environment: the ``serve`` / ``process`` / ``evaluate`` subcommands and their parts.

The runtime uses an env only through ``context.EnvRuntime`` (the hooks and Atropos-named methods it
calls) and writes run-time state only into the env's ``context.RunContext``; it imports nothing from
``atroposlib.envs`` (the contract an author subclasses, which imports the runtime).

* settings: ``config`` (``BaseEnvConfig``), ``config_loader`` (defaults < YAML < flags), ``cli``
  (``MyEnv.cli()``), ``preflight`` (URL checks before anything runs)
* the seam: ``context`` (``RunContext``, ``EnvRuntime``), ``atropos_hooks`` (which Atropos hooks an
  env overrides; the default ``get_server_info``)
* serve: ``runner`` (the loop), ``registration`` (``/register-env``, ``/info``), ``step_hooks``
  (evals, checkpoints, metrics per trainer step), ``progress``, ``failures``, ``backpressure`` and
  ``spool`` (the durable outbox), ``stopping``
* groups leaving an env: ``sending`` (filter, stamp, validate once), ``sinks`` (null, JSONL)
* the other subcommands: ``process``, ``evaluation`` (+ ``eval_results``, the one ``metrics.json``
  writer)
* what an env keeps across steps: ``checkpoint``, ``step_metrics`` (what ``wandb_log`` logs),
  ``metrics_logger`` (wandb or nothing)
"""
