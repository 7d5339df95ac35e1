"""Key rotation against writers: a row rewritten while `rotate_checkpoint_key` runs (between its
read of a batch and its update) keeps the new value, which its writer sealed with the first key
already. Each test's racing sealer writes the row, through the same calls a writer makes, right
after rotation read it."""

from collections.abc import Callable
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.utils import timezone
from langgraph.checkpoint.base import empty_checkpoint
from pytest_django.fixtures import Settings

from approvals.models import AuditEvent
from checkpoints import sealed_columns
from checkpoints.backends import get_backend
from checkpoints.backends.orm import maintenance
from checkpoints.langgraph import GatehouseSaver, layout, sealing
from checkpoints.models import LangGraphWrite
from checkpoints.storage.crypto import Sealer, current_sealer
from checkpoints.store import store_for

pytestmark = pytest.mark.django_db(transaction=True)


class Racing:
    """The real sealer, but another writer runs once, just before rotation reseals `target`."""

    def __init__(self, real: Sealer, *, target: Any, race: Callable[[], None]) -> None:
        self.real, self.target, self.race, self.raced = real, target, race, False

    @property
    def encrypts(self) -> bool:
        return self.real.encrypts

    def _maybe_race(self, stored: Any) -> None:
        if stored == self.target and not self.raced:
            self.raced = True
            self.race()

    def reseal(self, stored: str) -> str:
        self._maybe_race(stored)
        return self.real.reseal(stored)

    def seal_bytes(self, plain: bytes) -> bytes:
        self._maybe_race(plain)
        return self.real.seal_bytes(plain)

    def open_bytes(self, stored: bytes) -> bytes:
        return self.real.open_bytes(stored)


@pytest.fixture
def rotating(settings: Settings) -> Callable[[], None]:
    """Write with an old key; the returned call puts a new one first (rotation's setting)."""
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.CHECKPOINT_ENCRYPTION_KEY = old

    def put_new_key_first() -> None:
        settings.CHECKPOINT_ENCRYPTION_KEY = f"{new},{old}"

    return put_new_key_first


def test_rotation_keeps_a_store_item_written_while_it_runs(
    rotating: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = store_for(tenant="acme")
    store.put(("prefs",), "lang", {"v": "en"})
    rotating()
    stored = maintenance.StoreItem.objects.get().data

    def race() -> None:
        store.put(("prefs",), "lang", {"v": "fr"})

    monkeypatch.setattr(
        maintenance, "current_sealer", lambda: Racing(current_sealer(), target=stored, race=race)
    )
    get_backend().reseal()

    item = store.get(("prefs",), "lang")
    assert item is not None and item.value == {"v": "fr"}


def test_rotation_keeps_an_encrypted_column_written_while_it_runs(
    rotating: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    event = AuditEvent.objects.create(
        actor_name="ada", action="decide", data={"v": "en"}, created_at=timezone.now(), prev_hash="", hash="h"
    )
    rotating()
    stored = AuditEvent.objects.annotate(text=sealed_columns.stored_text("data")).get().text

    def race() -> None:
        AuditEvent.objects.filter(pk=event.pk).update(data={"v": "fr"})

    monkeypatch.setattr(
        sealed_columns, "current_sealer", lambda: Racing(current_sealer(), target=stored, race=race)
    )
    sealed_columns.reseal_columns()

    assert AuditEvent.objects.get().data == {"v": "fr"}


@pytest.mark.postgres_only  # SQLite: the rotation's open read holds the lock the racing write needs
def test_rotation_keeps_a_langgraph_write_replaced_while_it_runs(
    rotating: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    saver = GatehouseSaver()
    try:
        config = saver.put(
            {"configurable": {"thread_id": "t-race", "checkpoint_ns": ""}},
            empty_checkpoint(),
            {"source": "input", "step": -1},
            {},
        )
        # An error write: LangGraph replaces it when the task fails again.
        saver.put_writes(config, [("__error__", "first failure")], task_id="task-1")
        rotating()
        plain = layout.encode(saver.serde, "first failure")

        def race() -> None:
            saver.put_writes(config, [("__error__", "second failure")], task_id="task-1")

        monkeypatch.setattr(
            sealing, "current_sealer", lambda: Racing(current_sealer(), target=plain, race=race)
        )
        sealing.reseal()

        assert layout.unpack(current_sealer(), bytes(LangGraphWrite.objects.get().data)) == layout.encode(
            saver.serde, "second failure"
        )
        loaded = GatehouseSaver()
        try:
            found = loaded.get_tuple(config)
        finally:
            loaded.close()
        assert found is not None and found.pending_writes == [("task-1", "__error__", "second failure")]
    finally:
        saver.close()
