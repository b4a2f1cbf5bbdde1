"""Old path of the backend interface, kept only while ``atroposlib/envs/base.py`` imports ``APIServer``
from here (not an Atropos path: delete it once nothing imports it). Code in
``atroposlib.inference_clients.backend``."""

from atroposlib.inference_clients.backend import APIServer

__all__ = ["APIServer"]
