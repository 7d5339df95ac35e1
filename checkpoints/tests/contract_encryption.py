"""Contract: with CHECKPOINT_ENCRYPTION_KEY set, nothing is stored in the clear; keys rotate."""

from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from checkpoints.backends.base import CorruptCheckpoint
from checkpoints.digest import list_digest, row_key
from checkpoints.store import Store
from checkpoints.tests.helpers import THREAD, conversation, start, write
from checkpoints.tests.hooks import Hooks

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def fill(backend: Any) -> Any:
    """A thread with a list, a large and a small value, a pending write, and a store item."""
    head = conversation(backend, items=3, size=50)[-1]
    head = write(backend, head, {**head.values, "scratch": {"plan": "p" * 100}, "turn": 3})
    backend.put_write(thread_id=THREAD, checkpoint_id=head.id, task_id="result:c1", kind="result", value="ok")
    Store(tenant="user:ada", backend=backend).put(("memories",), "k", {"likes": "tea"})
    return head


class EncryptionContract(Hooks):
    def test_with_a_key_every_stored_value_write_and_store_item_is_encrypted(
        self, backend: Any, settings: Any
    ) -> None:
        settings.CHECKPOINT_ENCRYPTION_KEY = OLD
        head = fill(backend)

        texts = self.stored_texts(backend)

        assert len(texts) >= 7  # three items, two values, a write, a store item
        assert all(text.startswith("gAAAA") for text in texts)
        # Plain text would show its quotes or the long run of p's; a Fernet token (base64) has
        # neither, though it may hold "tea" or "ppp" by chance.
        assert not any('"tea"' in text or "p" * 20 in text or '"assistant"' in text for text in texts)
        assert backend.get(thread_id=THREAD).values == head.values
        assert backend.get_writes(thread_id=THREAD, checkpoint_id=head.id) == {"result:c1": ("result", "ok")}

    def test_digests_and_sharing_do_not_depend_on_the_key(self, backend: Any, settings: Any) -> None:
        plain = fill(backend)
        backend.delete_thread(thread_id=THREAD)
        settings.CHECKPOINT_ENCRYPTION_KEY = OLD

        sealed = fill(backend)

        assert sealed.digest == plain.digest  # a digest covers the state, not how it is stored
        assert backend.verify(backend.get(thread_id=THREAD)).values == plain.values
        assert row_key(list_digest(sealed.values["messages"])) in self.stored_values(backend, THREAD)

    def test_rotating_keeps_old_data_readable_then_reseal_frees_the_old_key(
        self, backend: Any, settings: Any
    ) -> None:
        settings.CHECKPOINT_ENCRYPTION_KEY = OLD
        head = fill(backend)
        settings.CHECKPOINT_ENCRYPTION_KEY = f"{NEW},{OLD}"

        assert backend.get(thread_id=THREAD).values == head.values
        assert backend.reseal() >= 7

        settings.CHECKPOINT_ENCRYPTION_KEY = NEW
        assert backend.get(thread_id=THREAD).values == head.values
        assert Store(tenant="user:ada", backend=backend).get(("memories",), "k").value == {"likes": "tea"}  # type: ignore[union-attr]

    def test_reseal_encrypts_what_was_stored_before_a_key_was_set(self, backend: Any, settings: Any) -> None:
        head = fill(backend)
        settings.CHECKPOINT_ENCRYPTION_KEY = NEW

        backend.reseal()

        assert all(text.startswith("gAAAA") for text in self.stored_texts(backend))
        assert backend.get(thread_id=THREAD).values == head.values

    def test_encrypted_data_without_its_key_says_the_key_is_missing(
        self, backend: Any, settings: Any
    ) -> None:
        settings.CHECKPOINT_ENCRYPTION_KEY = OLD
        fill(backend)
        settings.CHECKPOINT_ENCRYPTION_KEY = ""

        with pytest.raises(ImproperlyConfigured, match="CHECKPOINT_ENCRYPTION_KEY"):
            backend.get(thread_id=THREAD)

    def test_data_encrypted_under_another_key_is_refused_as_corrupt(
        self, backend: Any, settings: Any
    ) -> None:
        settings.CHECKPOINT_ENCRYPTION_KEY = OLD
        head = fill(backend)
        forged = Fernet(NEW.encode()).encrypt(b'{"content":"forged"}').decode()
        self.tamper(backend, THREAD, row_key(list_digest(head.values["messages"][:1])), forged)

        with pytest.raises(CorruptCheckpoint):
            backend.get(thread_id=THREAD)

    def test_a_thread_can_start_and_grow_under_a_key(self, backend: Any, settings: Any) -> None:
        settings.CHECKPOINT_ENCRYPTION_KEY = OLD
        _, first = start(backend, values={"messages": [], "turn": 0})

        second = write(backend, first, {"messages": [{"content": "hi"}], "turn": 1})

        assert backend.get(thread_id=THREAD) == second
