"""Contract: the cross-thread store, always scoped to a tenant."""

import time
from typing import Any

import pytest

from checkpoints.store import InvalidNamespace, Store
from checkpoints.tests.hooks import Hooks


def stores(backend: Any) -> tuple[Store, Store]:
    return Store(tenant="user:ada", backend=backend), Store(tenant="user:bob", backend=backend)


class StoreContract(Hooks):
    def test_store_put_then_get_returns_the_value_under_its_namespace(self, backend: Any) -> None:
        ada, _ = stores(backend)

        ada.put(("preferences",), "language", {"value": "fr"})
        item = ada.get(("preferences",), "language")

        assert item is not None
        assert (item.namespace, item.key, item.value) == (("preferences",), "language", {"value": "fr"})
        assert ada.get(("preferences",), "timezone") is None

    def test_store_put_again_replaces_the_value_and_keeps_when_it_was_created(self, backend: Any) -> None:
        ada, _ = stores(backend)
        ada.put(("memories",), "k", 1)
        first = ada.get(("memories",), "k")

        ada.put(("memories",), "k", 2)
        second = ada.get(("memories",), "k")

        assert first is not None and second is not None
        assert second.value == 2
        assert second.created_at == first.created_at
        assert second.updated_at >= first.updated_at

    def test_store_search_finds_items_under_a_prefix_newest_first(self, backend: Any) -> None:
        ada, _ = stores(backend)
        ada.put(("memories", "work"), "a", {"topic": "refunds"})
        ada.put(("memories", "home"), "b", {"topic": "garden"})
        ada.put(("memories", "work"), "c", {"topic": "refunds"})
        ada.put(("memoriesx",), "d", {"topic": "refunds"})

        assert [i.key for i in ada.search(("memories",))] == ["c", "b", "a"]
        assert [i.key for i in ada.search(("memories", "work"))] == ["c", "a"]
        assert [i.key for i in ada.search(("memories",), filter={"topic": "refunds"})] == ["c", "a"]
        assert [i.key for i in ada.search(("memories",), limit=1, offset=1)] == ["b"]
        assert [i.key for i in ada.search()] == ["d", "c", "b", "a"]

    def test_store_delete_removes_the_item(self, backend: Any) -> None:
        ada, _ = stores(backend)
        ada.put(("memories",), "k", 1)

        assert ada.delete(("memories",), "k") is True
        assert ada.get(("memories",), "k") is None
        assert ada.delete(("memories",), "k") is False

    def test_store_items_expire_after_their_ttl(self, backend: Any) -> None:
        ada, _ = stores(backend)
        ada.put(("cache",), "short", 1, ttl_s=0.05)
        ada.put(("cache",), "long", 2, ttl_s=3600)
        time.sleep(0.1)

        assert ada.get(("cache",), "short") is None
        assert [i.key for i in ada.search(("cache",))] == ["long"]
        assert backend.store_purge_expired() == 1

    def test_one_tenant_never_reads_anothers_keys(self, backend: Any) -> None:
        ada, bob = stores(backend)
        ada.put(("memories",), "secret", "ada's")

        assert bob.get(("memories",), "secret") is None
        assert bob.get(("user:ada", "memories"), "secret") is None  # a namespace is always under the tenant
        assert bob.search() == []
        assert bob.delete(("memories",), "secret") is False
        assert ada.get(("memories",), "secret").value == "ada's"  # type: ignore[union-attr]

    def test_one_tenant_writing_anothers_namespace_writes_its_own(self, backend: Any) -> None:
        ada, bob = stores(backend)

        bob.put(("user:ada", "memories"), "secret", "bob's")

        assert ada.search() == []
        assert [i.namespace for i in bob.search()] == [("user:ada", "memories")]

    @pytest.mark.parametrize("namespace", [("",), ("a\x1fb",), "memories", (1,)])
    def test_store_refuses_a_malformed_namespace(self, backend: Any, namespace: Any) -> None:
        ada, _ = stores(backend)

        with pytest.raises(InvalidNamespace):
            ada.put(namespace, "k", 1)

    def test_store_refuses_a_value_that_is_not_json(self, backend: Any) -> None:
        ada, _ = stores(backend)

        with pytest.raises(TypeError):
            ada.put(("memories",), "k", {1, 2})
