"""Stores behind the trajectory API: ``make_store(settings)`` picks SQLite (durable) or memory."""

from __future__ import annotations

from atroposlib.api.settings import ApiSettings
from atroposlib.api.store.base import Store
from atroposlib.api.store.memory import MemoryStore
from atroposlib.api.store.sqlite import SqliteStore


def make_store(settings: ApiSettings) -> Store:
    if settings.store == "memory":
        return MemoryStore()
    return SqliteStore(settings.data_dir, settings.sqlite_synchronous)


__all__ = ["MemoryStore", "SqliteStore", "Store", "make_store"]
