"""Cross-thread memory, always scoped to one tenant.

Code never names the tenant of a key it reads: it gets a Store for a tenant (store_for, or
store_for_thread, which takes the tenant from the thread) and every namespace it passes is
placed under that tenant. Whatever a caller passes, one tenant cannot reach another's keys.

    store = store_for_thread(thread_id=ctx.thread_id)
    store.put(("preferences",), "language", {"value": "fr"}, ttl_s=86_400)
    store.get(("preferences",), "language").value
"""

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from checkpoints.backends import get_backend
from checkpoints.backends.base import BaseCheckpointBackend, StoreItem, ThreadData

if TYPE_CHECKING:
    from checkpoints.models import Thread

NAMESPACE_SEPARATOR = "\x1f"
TENANT_METADATA_KEY = "tenant"


class InvalidNamespace(ValueError):
    """A namespace element is empty, not a string, or holds the separator character."""


def check_namespace(namespace: tuple[str, ...]) -> tuple[str, ...]:
    """Return namespace as a tuple of valid elements, or raise InvalidNamespace."""
    if isinstance(namespace, str):
        raise InvalidNamespace("a namespace is a tuple of strings, such as ('memories', 'profile')")
    elements = tuple(namespace)
    for element in elements:
        if not isinstance(element, str) or not element or NAMESPACE_SEPARATOR in element:
            raise InvalidNamespace(f"namespace element {element!r} must be a non-empty string without \\x1f")
    return elements


def encode_path(elements: tuple[str, ...]) -> str:
    """Elements each followed by the separator, so ('a',) is a prefix of ('a', 'b') but not of ('ab',)."""
    return "".join(element + NAMESPACE_SEPARATOR for element in elements)


def decode_path(path: str) -> tuple[str, ...]:
    return tuple(path.split(NAMESPACE_SEPARATOR)[:-1])


class Store:
    """Put, get, search and delete JSON values under (namespace, key) for one tenant."""

    def __init__(self, *, tenant: str, backend: BaseCheckpointBackend | None = None) -> None:
        self.tenant = check_namespace((tenant,))[0]
        self._backend = backend

    @property
    def backend(self) -> BaseCheckpointBackend:
        return self._backend or get_backend()

    def _scoped(self, namespace: tuple[str, ...]) -> tuple[str, ...]:
        return (self.tenant, *check_namespace(namespace))

    def _unscoped(self, item: StoreItem) -> StoreItem:
        return replace(item, namespace=item.namespace[1:])

    def put(self, namespace: tuple[str, ...], key: str, value: Any, *, ttl_s: float | None = None) -> None:
        """Set the value (JSON-ready) under namespace and key; it expires after ttl_s seconds if given."""
        self.backend.store_put(namespace=self._scoped(namespace), key=key, value=value, ttl_s=ttl_s)

    def get(self, namespace: tuple[str, ...], key: str) -> StoreItem | None:
        item = self.backend.store_get(namespace=self._scoped(namespace), key=key)
        return self._unscoped(item) if item else None

    def search(
        self,
        prefix: tuple[str, ...] = (),
        *,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[StoreItem]:
        """Items under the namespace prefix, newest first, optionally matching top-level pairs."""
        found = self.backend.store_search(
            prefix=self._scoped(prefix), filter=filter, limit=limit, offset=offset
        )
        return [self._unscoped(item) for item in found]

    def delete(self, namespace: tuple[str, ...], key: str) -> bool:
        return self.backend.store_delete(namespace=self._scoped(namespace), key=key)


def store_for(*, tenant: str) -> Store:
    """The store of one tenant (a user, an organisation: whatever the caller authenticated)."""
    return Store(tenant=tenant)


def tenant_of(thread: "ThreadData | Thread") -> str:
    """A thread's tenant: its metadata's "tenant" if set when it started, else its agent, so
    threads of one agent share memory unless a tenant separates them."""
    return str(thread.metadata.get(TENANT_METADATA_KEY) or f"agent:{thread.agent}")


def store_for_thread(*, thread_id: str) -> Store:
    return store_for(tenant=tenant_of(get_backend().get_thread(thread_id=thread_id)))
