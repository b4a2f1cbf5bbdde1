"""The env contract an author sees, and Atropos's module paths.

``base`` (``BaseEnv``: the hooks an env implements), ``atropos_compat`` (the Atropos-named methods
and attributes env files use, fenced off from the contract and delegating to ``atroposlib.runtime``),
``eval`` (Atropos's stand-alone ``EvalBase``), ``server_handling`` and ``reward_fns`` (Atropos's
import paths of the inference clients and reward functions). What runs an env lives in
``atroposlib.runtime``, which imports nothing from here.
"""
