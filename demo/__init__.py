"""The end-to-end demo (``atropos-demo``, ``python -m demo``): a model learns a task through the real RL
loop (run-api, an inference server, an env, the GRPO trainer of ``example_trainer``), run by the
launcher's local backend, with a report folder at the end. Each preset (model + task) is one module in
``demo/presets/`` and one line in ``demo/presets/__init__.py``; the package sits above ``example_trainer``,
which never imports it."""
