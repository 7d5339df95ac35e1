"""The cross-thread store for the ORM backend (checkpoints.store.Store adds the tenant)."""

import json
from datetime import timedelta
from itertools import islice
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from checkpoints.backends.base import StoreItem
from checkpoints.digest import canonical_json
from checkpoints.models import StoreItem as StoreRow
from checkpoints.storage.crypto import current_sealer
from checkpoints.store import check_namespace, decode_path, encode_path


def _split(namespace: tuple[str, ...]) -> tuple[str, str]:
    elements = check_namespace(namespace)
    if not elements:
        raise ValueError("a store namespace starts with its tenant")
    return elements[0], encode_path(elements[1:])


def _live(rows: QuerySet[StoreRow]) -> QuerySet[StoreRow]:
    return rows.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))


def _item(row: StoreRow) -> StoreItem:
    return StoreItem(
        namespace=(row.tenant, *decode_path(row.namespace)),
        key=row.key,
        value=json.loads(current_sealer().open(row.data)),
        created_at=row.created_at,
        updated_at=row.updated_at,
        expires_at=row.expires_at,
    )


def _matches(value: Any, wanted: dict[str, Any] | None) -> bool:
    return not wanted or (isinstance(value, dict) and all(value.get(k) == v for k, v in wanted.items()))


class OrmStoreMixin:
    def store_put(
        self, *, namespace: tuple[str, ...], key: str, value: Any, ttl_s: float | None = None
    ) -> None:
        tenant, path = _split(namespace)
        data = current_sealer().seal(canonical_json(value))
        expires = timezone.now() + timedelta(seconds=ttl_s) if ttl_s is not None else None
        StoreRow.objects.update_or_create(
            tenant=tenant, namespace=path, key=key, defaults={"data": data, "expires_at": expires}
        )

    def store_get(self, *, namespace: tuple[str, ...], key: str) -> StoreItem | None:
        tenant, path = _split(namespace)
        row = _live(StoreRow.objects.filter(tenant=tenant, namespace=path, key=key)).first()
        return _item(row) if row else None

    def store_search(
        self,
        *,
        prefix: tuple[str, ...],
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[StoreItem]:
        tenant, path = _split(prefix)
        rows = _live(StoreRow.objects.filter(tenant=tenant, namespace__startswith=path))
        rows = rows.order_by("-updated_at", "namespace", "key")
        if not filter:
            return [_item(row) for row in rows[offset : offset + limit]]
        # Values may be encrypted, so the filter runs here, after decryption.
        matching = (
            item for item in map(_item, rows.iterator(chunk_size=200)) if _matches(item.value, filter)
        )
        return list(islice(matching, offset, offset + limit))

    def store_delete(self, *, namespace: tuple[str, ...], key: str) -> bool:
        tenant, path = _split(namespace)
        return bool(StoreRow.objects.filter(tenant=tenant, namespace=path, key=key).delete()[0])

    def store_purge_expired(self) -> int:
        return StoreRow.objects.filter(expires_at__lte=timezone.now()).delete()[0]
