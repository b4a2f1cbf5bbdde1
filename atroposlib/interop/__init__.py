"""Interop with other environment standards (OpenEnv, verifiers): their environments run through atroposlib.

This package sits on top of the env contract (``atroposlib.envs``); nothing below imports it.
"""
