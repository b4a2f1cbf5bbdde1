"""Interop with other environment standards (OpenEnv, verifiers): their environments run through atroposlib.

One subpackage per standard (``openenv``, ``verifiers``); what their env drivers share is here:
``driver`` (``InteropEnv``: the skeleton of a driver and its one back-off rule after failed groups) and
``turns`` (exact-token multi-turn episodes). This package sits on top of the env contract
(``atroposlib.envs``); nothing below imports it.
"""
