"""The cross-thread store for the in-memory backend (checkpoints.store.Store adds the tenant)."""

import json
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from checkpoints.backends.base import StoreItem, StoreItems
from checkpoints.digest import canonical_json
from checkpoints.storage.crypto import Sealer, current_sealer
from checkpoints.store import check_namespace


@dataclass
class _Entry:
    data: str
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None


def _tenant_scoped(namespace: tuple[str, ...]) -> tuple[str, ...]:
    elements = check_namespace(namespace)
    if not elements:
        raise ValueError("a store namespace starts with its tenant")
    return elements


def _matches(value: Any, wanted: dict[str, Any] | None) -> bool:
    return not wanted or (isinstance(value, dict) and all(value.get(k) == v for k, v in wanted.items()))


class MemoryStoreMixin:
    def __init__(self) -> None:
        self._store: dict[tuple[tuple[str, ...], str], _Entry] = {}
        self._store_lock = threading.RLock()

    def _item(self, namespace: tuple[str, ...], key: str, entry: _Entry) -> StoreItem:
        value = json.loads(current_sealer().open(entry.data))
        return StoreItem(namespace, key, value, entry.created_at, entry.updated_at, entry.expires_at)

    def _live(self, entry: _Entry | None) -> bool:
        return entry is not None and (entry.expires_at is None or entry.expires_at > timezone.now())

    def store_put(
        self, *, namespace: tuple[str, ...], key: str, value: Any, ttl_s: float | None = None
    ) -> None:
        namespace = _tenant_scoped(namespace)
        data = current_sealer().seal(canonical_json(value))
        now = timezone.now()
        expires = now + timedelta(seconds=ttl_s) if ttl_s is not None else None
        with self._store_lock:
            old = self._store.get((namespace, key))
            created = old.created_at if old else now
            self._store[(namespace, key)] = _Entry(data, created, now, expires)

    def store_get(self, *, namespace: tuple[str, ...], key: str) -> StoreItem | None:
        namespace = _tenant_scoped(namespace)
        with self._store_lock:
            entry = self._store.get((namespace, key))
        return self._item(namespace, key, entry) if entry is not None and self._live(entry) else None

    def store_search(
        self,
        *,
        prefix: tuple[str, ...],
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> StoreItems:
        prefix = _tenant_scoped(prefix)
        with self._store_lock:
            found = [
                self._item(namespace, key, entry)
                for (namespace, key), entry in self._store.items()
                if namespace[: len(prefix)] == prefix and self._live(entry)
            ]
        found.sort(key=lambda i: (-i.updated_at.timestamp(), i.namespace, i.key))
        return [item for item in found if _matches(item.value, filter)][offset : offset + limit]

    def store_delete(self, *, namespace: tuple[str, ...], key: str) -> bool:
        with self._store_lock:
            return self._store.pop((_tenant_scoped(namespace), key), None) is not None

    def store_purge_expired(self) -> int:
        with self._store_lock:
            expired = [k for k, entry in self._store.items() if not self._live(entry)]
            for k in expired:
                del self._store[k]
            return len(expired)

    def reseal_store(self, sealer: Sealer) -> int:
        rewritten = 0
        with self._store_lock:
            for entry in self._store.values():
                sealed = sealer.reseal(entry.data)
                rewritten += sealed != entry.data
                entry.data = sealed
        return rewritten
