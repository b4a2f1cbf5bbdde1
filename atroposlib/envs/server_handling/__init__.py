"""Atropos import paths of the inference clients (``atroposlib.envs.server_handling.*``).

The code lives in ``atroposlib.inference_clients``; the modules here only re-export the names
Atropos's environment files import (tests/compat/test_public_names.py lists them).
"""
