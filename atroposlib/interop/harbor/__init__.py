"""Harbor tasks as environments: ``python -m atroposlib.interop.harbor serve|process|evaluate
--harbor.tasks FOLDER``. See ``env`` and docs/interop.md.

A Harbor task (``task.toml``, ``instruction.md``, ``environment/``, ``tests/test.sh``) is played as a
multi-turn episode with a ``shell`` tool, in a sandbox per episode (``sandbox``: our bubblewrap host
sandbox, ``host_sandbox``, or Harbor's own podman runtime, ``harbor_runtime``), and scored by its own
verifier. ``harbor_backend`` is our host sandbox as a Harbor environment backend for Harbor's own CLI.

Importing this package imports nothing: Harbor's Python (3.12, no torch) imports ``harbor_backend`` and
``harbor_bridge`` from it, and they need only the leaf modules.
"""
