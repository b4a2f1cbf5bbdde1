"""Agent programs someone else wrote, trained through the managed-server proxy unmodified.

``frameworks`` is where each agent framework's own environment is (``scripts/setup_agents.sh``
installs them); ``program`` runs one agent program (a Python callable or a command) against a
session URL with a time limit; ``proxy_host`` serves the proxy inside an env's process;
``session_client`` opens, reads and closes proxy sessions; ``harness`` is the env
(``AgentHarnessEnv``) whose episode is one run of the agent program in a fresh session, scored by the
env's own reward (docs/interop.md, "Bring your own agent").
"""
