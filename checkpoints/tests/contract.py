"""The contract every checkpoint backend passes, modelled on Django's SessionTestsMixin.

A backend's test class inherits BackendContract, supplies a `backend` fixture and implements
the Hooks: the few things that need to know how the backend keeps its data. The suite's
topics live in their own modules (storage, retention, the store, encryption).
"""

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import transaction

from checkpoints.backends.base import (
    CheckpointNotFound,
    CorruptCheckpoint,
    HeadConflict,
    NewCheckpoint,
    ThreadExists,
    ThreadNotFound,
)
from checkpoints.ids import InvalidThreadId
from checkpoints.models import CheckpointSource, ThreadStatus
from checkpoints.tests.contract_encryption import EncryptionContract
from checkpoints.tests.contract_retention import RetentionContract
from checkpoints.tests.contract_storage import StorageContract
from checkpoints.tests.contract_store import StoreContract
from checkpoints.tests.helpers import MISSING_UUID, THREAD, ids, new, put_after, start
from checkpoints.tests.hooks import Hooks

__all__ = ["THREAD", "BackendContract", "new", "put_after", "start"]


class ThreadsContract(Hooks):
    """Threads, heads, leases, writes: what the store did before values were stored linearly."""

    # --- create_thread ------------------------------------------------------------------

    def test_create_thread_makes_its_first_checkpoint_the_head(self, backend: Any) -> None:
        thread, first = start(backend, metadata={"source": "test"})

        assert thread.id == THREAD
        assert thread.agent == "refunds"
        assert thread.status == ThreadStatus.RUNNING
        assert thread.head_id == first.id
        assert thread.metadata == {"source": "test"}
        assert first.step == 0
        assert first.parent_id is None
        assert first.source == CheckpointSource.INPUT
        assert backend.get_thread(thread_id=THREAD) == thread

    def test_create_thread_with_a_taken_id_raises_thread_exists(self, backend: Any) -> None:
        _, first = start(backend)

        with pytest.raises(ThreadExists) as excinfo:
            start(backend, agent="outreach")

        assert excinfo.value.thread_id == THREAD
        assert backend.get_thread(thread_id=THREAD).agent == "refunds"
        assert ids(backend.list(thread_id=THREAD)) == [first.id]

    def test_create_thread_refuses_an_id_that_breaks_the_rule_and_writes_nothing(self, backend: Any) -> None:
        with pytest.raises(InvalidThreadId):
            start(backend, thread_id="a/b")

        with pytest.raises(ThreadNotFound):
            backend.get_thread(thread_id="a/b")

    def test_a_checkpoint_written_with_a_time_keeps_it(self, backend: Any) -> None:
        then = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
        _, first = start(backend)

        written = backend.put(
            thread_id=THREAD,
            parent_id=first.id,
            expected_head=first.id,
            checkpoint=new({"n": 1}, created_at=then),
            status=ThreadStatus.RUNNING,
        )

        assert written.created_at == then
        assert backend.get(thread_id=THREAD, checkpoint_id=written.id).created_at == then

    # --- get ----------------------------------------------------------------------------

    def test_get_without_an_id_returns_the_head(self, backend: Any) -> None:
        _, first = start(backend)
        second = put_after(backend, first)

        assert backend.get(thread_id=THREAD) == second

    def test_get_by_id_returns_that_checkpoint_even_when_it_is_not_the_head(self, backend: Any) -> None:
        _, first = start(backend)
        put_after(backend, first)

        assert backend.get(thread_id=THREAD, checkpoint_id=first.id) == first

    def test_summary_is_the_checkpoint_without_its_values(self, backend: Any) -> None:
        _, first = start(backend)
        second = put_after(backend, first)

        summary = backend.summary(thread_id=THREAD, checkpoint_id=first.id)

        assert not hasattr(summary, "values")
        assert {k: v for k, v in vars(first).items() if k != "values"} == vars(summary)
        assert backend.summary(thread_id=THREAD, checkpoint_id=second.id).id == second.id

    def test_summary_of_an_unknown_checkpoint_or_thread_raises_not_found(self, backend: Any) -> None:
        start(backend)
        with pytest.raises(CheckpointNotFound):
            backend.summary(thread_id=THREAD, checkpoint_id=MISSING_UUID)
        with pytest.raises(ThreadNotFound):
            backend.summary(thread_id="nope", checkpoint_id=MISSING_UUID)

    def test_get_returns_what_was_written(self, backend: Any) -> None:
        _, first = start(backend)
        values = {"messages": [{"id": "m1", "role": "user", "content": "héllo"}], "count": 3}
        written = backend.put(
            thread_id=THREAD,
            parent_id=first.id,
            expected_head=first.id,
            checkpoint=NewCheckpoint(
                values=values,
                source=CheckpointSource.RESUME,
                next=["tools"],
                node="model",
                created_by="worker:w1",
                schema_version=2,
                metadata={"model": "m"},
            ),
            status=ThreadStatus.WAITING,
        )

        loaded = backend.get(thread_id=THREAD, checkpoint_id=written.id)

        assert loaded.values == values
        assert loaded.source == CheckpointSource.RESUME
        assert loaded.next == ["tools"]
        assert loaded.node == "model"
        assert loaded.created_by == "worker:w1"
        assert loaded.schema_version == 2
        assert loaded.metadata == {"model": "m"}
        assert loaded.parent_id == first.id
        assert loaded.size_bytes > 0

    def test_get_refuses_a_checkpoint_whose_values_were_tampered_with(self, backend: Any) -> None:
        _, first = start(backend)
        second = put_after(backend, first)
        self.corrupt(backend, THREAD, first.id)

        with pytest.raises(CorruptCheckpoint) as excinfo:
            backend.get(thread_id=THREAD, checkpoint_id=first.id)

        assert THREAD in str(excinfo.value)
        assert first.id in str(excinfo.value)
        assert (excinfo.value.thread_id, excinfo.value.checkpoint_id) == (THREAD, first.id)
        assert backend.get(thread_id=THREAD, checkpoint_id=second.id) == second

    def test_get_of_a_tampered_head_raises_corrupt_checkpoint(self, backend: Any) -> None:
        _, first = start(backend)
        self.corrupt(backend, THREAD, first.id)

        with pytest.raises(CorruptCheckpoint, match=first.id):
            backend.get(thread_id=THREAD)

    # --- put ----------------------------------------------------------------------------

    def test_put_moves_the_head_and_sets_the_status(self, backend: Any) -> None:
        _, first = start(backend)

        second = put_after(backend, first, status=ThreadStatus.WAITING)

        thread = backend.get_thread(thread_id=THREAD)
        assert thread.head_id == second.id
        assert thread.status == ThreadStatus.WAITING
        assert second.parent_id == first.id

    def test_put_with_a_stale_expected_head_raises_head_conflict_and_writes_nothing(
        self, backend: Any
    ) -> None:
        _, first = start(backend)
        second = put_after(backend, first, status=ThreadStatus.WAITING)
        before = backend.list(thread_id=THREAD)

        with pytest.raises(HeadConflict) as excinfo:
            put_after(backend, first, expected_head=first.id, status=ThreadStatus.DONE)

        assert (excinfo.value.expected, excinfo.value.actual) == (first.id, second.id)
        assert backend.list(thread_id=THREAD) == before
        thread = backend.get_thread(thread_id=THREAD)
        assert thread.head_id == second.id
        assert thread.status == ThreadStatus.WAITING

    def test_put_expecting_no_head_conflicts_with_a_thread_that_has_one(self, backend: Any) -> None:
        _, first = start(backend)

        with pytest.raises(HeadConflict):
            backend.put(
                thread_id=THREAD,
                parent_id=first.id,
                expected_head=None,
                checkpoint=new(),
                status=ThreadStatus.RUNNING,
            )

        assert ids(backend.list(thread_id=THREAD)) == [first.id]

    def test_put_numbers_steps_from_the_parent(self, backend: Any) -> None:
        _, first = start(backend)
        second = put_after(backend, first)
        third = put_after(backend, second)

        assert [first.step, second.step, third.step] == [0, 1, 2]

    def test_fork_from_an_older_checkpoint_keeps_both_branches(self, backend: Any) -> None:
        _, first = start(backend)
        second = put_after(backend, first)
        third = put_after(backend, second)

        fork = put_after(backend, second, expected_head=third.id, n=99)

        assert fork.step == second.step + 1
        assert fork.parent_id == third.parent_id == second.id
        assert backend.get_thread(thread_id=THREAD).head_id == fork.id
        assert set(ids(backend.list(thread_id=THREAD))) == {first.id, second.id, third.id, fork.id}
        assert backend.get(thread_id=THREAD, checkpoint_id=third.id) == third

    def test_put_under_an_unknown_parent_raises_checkpoint_not_found(self, backend: Any) -> None:
        _, first = start(backend)

        with pytest.raises(CheckpointNotFound):
            backend.put(
                thread_id=THREAD,
                parent_id=MISSING_UUID,
                expected_head=first.id,
                checkpoint=new(),
                status=ThreadStatus.RUNNING,
            )

        assert ids(backend.list(thread_id=THREAD)) == [first.id]
        assert backend.get_thread(thread_id=THREAD).head_id == first.id

    def test_put_under_a_parent_of_another_thread_raises_checkpoint_not_found(self, backend: Any) -> None:
        _, first = start(backend)
        _, other = start(backend, "thread-2")

        with pytest.raises(CheckpointNotFound):
            backend.put(
                thread_id=THREAD,
                parent_id=other.id,
                expected_head=first.id,
                checkpoint=new(),
                status=ThreadStatus.RUNNING,
            )

        assert ids(backend.list(thread_id=THREAD)) == [first.id]

    # --- list ---------------------------------------------------------------------------

    def test_list_returns_every_checkpoint_newest_first(self, backend: Any) -> None:
        _, first = start(backend)
        second = put_after(backend, first)
        third = put_after(backend, second)

        assert ids(backend.list(thread_id=THREAD)) == [third.id, second.id, first.id]

    def test_list_with_a_limit_returns_the_newest(self, backend: Any) -> None:
        _, first = start(backend)
        second = put_after(backend, first)
        third = put_after(backend, second)

        assert ids(backend.list(thread_id=THREAD, limit=2)) == [third.id, second.id]

    def test_list_keeps_threads_apart(self, backend: Any) -> None:
        _, first = start(backend)
        _, other = start(backend, "thread-2")

        assert ids(backend.list(thread_id=THREAD)) == [first.id]
        assert ids(backend.list(thread_id="thread-2")) == [other.id]

    # --- set_status ---------------------------------------------------------------------

    def test_set_status_without_expected_head_always_applies(self, backend: Any) -> None:
        start(backend)

        assert backend.set_status(thread_id=THREAD, status=ThreadStatus.PAUSED) is True
        assert backend.get_thread(thread_id=THREAD).status == ThreadStatus.PAUSED

    def test_set_status_with_the_current_head_applies(self, backend: Any) -> None:
        _, first = start(backend)

        assert backend.set_status(thread_id=THREAD, status=ThreadStatus.DONE, expected_head=first.id) is True
        assert backend.get_thread(thread_id=THREAD).status == ThreadStatus.DONE

    def test_set_status_with_a_stale_head_changes_nothing(self, backend: Any) -> None:
        _, first = start(backend)
        put_after(backend, first)

        changed = backend.set_status(
            thread_id=THREAD, status=ThreadStatus.FAILED, expected_head=first.id, error="boom"
        )

        assert changed is False
        assert backend.get_thread(thread_id=THREAD).status == ThreadStatus.RUNNING

    def test_set_status_of_an_unknown_thread_returns_false(self, backend: Any) -> None:
        assert backend.set_status(thread_id="nope", status=ThreadStatus.DONE) is False

    # --- leases -------------------------------------------------------------------------

    def test_claim_takes_a_free_lease_and_returns_the_thread(self, backend: Any) -> None:
        start(backend, metadata={"tenant": "acme", "tags": ["vip"]})

        thread = backend.claim(thread_id=THREAD, owner="w1", ttl_s=60).thread

        # As read back, field by field: the head's id, the metadata, the times with their zone.
        assert thread == backend.get_thread(thread_id=THREAD)
        assert thread.metadata == {"tenant": "acme", "tags": ["vip"]}

    def test_a_second_owner_cannot_claim_an_unexpired_lease(self, backend: Any) -> None:
        start(backend)
        backend.claim(thread_id=THREAD, owner="w1", ttl_s=60)

        assert backend.claim(thread_id=THREAD, owner="w2", ttl_s=60) is None

    def test_a_second_owner_can_claim_an_expired_lease(self, backend: Any) -> None:
        start(backend)
        backend.claim(thread_id=THREAD, owner="w1", ttl_s=0.05)
        time.sleep(0.1)

        assert backend.claim(thread_id=THREAD, owner="w2", ttl_s=60) is not None
        assert backend.claim(thread_id=THREAD, owner="w1", ttl_s=60) is None

    def test_the_owner_can_claim_its_lease_again(self, backend: Any) -> None:
        start(backend)
        backend.claim(thread_id=THREAD, owner="w1", ttl_s=60)

        assert backend.claim(thread_id=THREAD, owner="w1", ttl_s=60) is not None

    def test_release_frees_the_lease_for_another_owner(self, backend: Any) -> None:
        start(backend)
        backend.claim(thread_id=THREAD, owner="w1", ttl_s=60)

        backend.release(thread_id=THREAD, owner="w1")

        assert backend.claim(thread_id=THREAD, owner="w2", ttl_s=60) is not None

    def test_release_by_another_owner_keeps_the_lease(self, backend: Any) -> None:
        start(backend)
        backend.claim(thread_id=THREAD, owner="w1", ttl_s=60)

        backend.release(thread_id=THREAD, owner="w2")

        assert backend.claim(thread_id=THREAD, owner="w2", ttl_s=60) is None

    def test_hand_off_returns_the_thread_to_its_holder_only(self, backend: Any) -> None:
        start(backend)
        backend.claim(thread_id=THREAD, owner="w1", ttl_s=60)

        assert backend.hand_off(thread_id=THREAD, owner="w2") is None
        assert backend.hand_off(thread_id=THREAD, owner="w1") == backend.get_thread(thread_id=THREAD)
        assert backend.claim(thread_id=THREAD, owner="w2", ttl_s=60) is not None  # lapsed at once
        assert backend.hand_off(thread_id="nope", owner="w1") is None

    def test_hand_off_with_a_ttl_keeps_the_lease(self, backend: Any) -> None:
        start(backend)
        backend.claim(thread_id=THREAD, owner="w1", ttl_s=0)  # lapsed

        assert backend.hand_off(thread_id=THREAD, owner="w1", ttl_s=60) is not None

        assert backend.claim(thread_id=THREAD, owner="w2", ttl_s=60) is None
        assert backend.renew(owners=["w1"], ttl_s=60) == 1

    def test_a_claim_names_the_lapsed_lease_it_took(self, backend: Any) -> None:
        start(backend)
        assert backend.claim(thread_id=THREAD, owner="w1", ttl_s=60).lapsed_owner == ""  # free
        assert backend.claim(thread_id=THREAD, owner="w1", ttl_s=60).lapsed_owner == ""  # its own, live
        backend.hand_off(thread_id=THREAD, owner="w1")  # committed; then died before releasing

        assert backend.claim(thread_id=THREAD, owner="w2", ttl_s=60).lapsed_owner == "w1"
        backend.release(thread_id=THREAD, owner="w2")  # sent its follow-up, released
        assert backend.claim(thread_id=THREAD, owner="w3", ttl_s=60).lapsed_owner == ""
        backend.hand_off(thread_id=THREAD, owner="w3")
        # The same task redelivered to the worker node it died on: its own name, lapsed.
        assert backend.claim(thread_id=THREAD, owner="w3", ttl_s=60).lapsed_owner == "w3"

    def test_claim_of_an_unknown_thread_returns_none(self, backend: Any) -> None:
        assert backend.claim(thread_id="nope", owner="w1", ttl_s=60) is None

    # --- writes -------------------------------------------------------------------------

    def test_put_write_keeps_the_first_write_for_a_task(self, backend: Any) -> None:
        _, first = start(backend)

        assert (
            backend.put_write(
                thread_id=THREAD,
                checkpoint_id=first.id,
                task_id="result:call_1",
                kind="result",
                value="first",
            )
            is True
        )
        assert (
            backend.put_write(
                thread_id=THREAD,
                checkpoint_id=first.id,
                task_id="result:call_1",
                kind="result",
                value="second",
            )
            is False
        )

        assert backend.get_writes(thread_id=THREAD, checkpoint_id=first.id) == {
            "result:call_1": ("result", "first")
        }

    def test_get_writes_maps_task_ids_to_kind_and_value(self, backend: Any) -> None:
        _, first = start(backend)
        decision = {"decision": "edit", "args": {"amount_cents": 100}}
        backend.put_write(
            thread_id=THREAD,
            checkpoint_id=first.id,
            task_id="decision:call_1",
            kind="decision",
            value=decision,
        )
        backend.put_write(
            thread_id=THREAD, checkpoint_id=first.id, task_id="result:call_1", kind="result", value="ok"
        )

        assert backend.get_writes(thread_id=THREAD, checkpoint_id=first.id) == {
            "decision:call_1": ("decision", decision),
            "result:call_1": ("result", "ok"),
        }

    def test_writes_belong_to_one_checkpoint(self, backend: Any) -> None:
        _, first = start(backend)
        second = put_after(backend, first)
        backend.put_write(thread_id=THREAD, checkpoint_id=first.id, task_id="t", kind="result", value=1)

        assert backend.get_writes(thread_id=THREAD, checkpoint_id=second.id) == {}
        assert (
            backend.put_write(thread_id=THREAD, checkpoint_id=second.id, task_id="t", kind="result", value=2)
            is True
        )

    def test_put_write_refuses_a_value_that_is_not_json(self, backend: Any) -> None:
        _, first = start(backend)

        with pytest.raises(TypeError):
            backend.put_write(
                thread_id=THREAD, checkpoint_id=first.id, task_id="t", kind="result", value={1, 2}
            )

        assert backend.get_writes(thread_id=THREAD, checkpoint_id=first.id) == {}

    # --- delete_thread ------------------------------------------------------------------

    def test_delete_thread_removes_the_thread_its_checkpoints_and_writes(self, backend: Any) -> None:
        _, first = start(backend)
        second = put_after(backend, first)
        backend.put_write(thread_id=THREAD, checkpoint_id=second.id, task_id="t", kind="result", value=1)

        backend.delete_thread(thread_id=THREAD)

        with pytest.raises(ThreadNotFound):
            backend.get(thread_id=THREAD)
        with pytest.raises(ThreadNotFound):
            backend.get_thread(thread_id=THREAD)
        assert backend.list(thread_id=THREAD) == []
        assert backend.get_writes(thread_id=THREAD, checkpoint_id=second.id) == {}

    def test_delete_thread_leaves_other_threads_alone(self, backend: Any) -> None:
        start(backend)
        _, other = start(backend, "thread-2")

        backend.delete_thread(thread_id=THREAD)

        assert backend.get(thread_id="thread-2") == other

    def test_a_deleted_thread_id_can_be_used_again(self, backend: Any) -> None:
        start(backend)
        backend.delete_thread(thread_id=THREAD)

        thread, first = start(backend)

        assert thread.head_id == first.id
        assert backend.get_writes(thread_id=THREAD, checkpoint_id=first.id) == {}

    # --- unknown threads and checkpoints ------------------------------------------------

    def test_get_thread_of_an_unknown_thread_raises_thread_not_found(self, backend: Any) -> None:
        with pytest.raises(ThreadNotFound) as excinfo:
            backend.get_thread(thread_id="nope")

        assert excinfo.value.thread_id == "nope"

    def test_get_head_of_an_unknown_thread_raises_thread_not_found(self, backend: Any) -> None:
        with pytest.raises(ThreadNotFound):
            backend.get(thread_id="nope")

    def test_get_by_id_on_an_unknown_thread_raises_thread_not_found(self, backend: Any) -> None:
        with pytest.raises(ThreadNotFound):
            backend.get(thread_id="nope", checkpoint_id=MISSING_UUID)

    def test_put_on_an_unknown_thread_raises_thread_not_found(self, backend: Any) -> None:
        with pytest.raises(ThreadNotFound):
            backend.put(
                thread_id="nope",
                parent_id=MISSING_UUID,
                expected_head=MISSING_UUID,
                checkpoint=new(),
                status=ThreadStatus.RUNNING,
            )

    @pytest.mark.django_db
    def test_lock_thread_of_an_unknown_thread_raises_thread_not_found(self, backend: Any) -> None:
        with pytest.raises(ThreadNotFound), transaction.atomic():
            backend.lock_thread(thread_id="nope")

    @pytest.mark.parametrize("checkpoint_id", [MISSING_UUID, "not-a-uuid"])
    def test_get_of_an_unknown_checkpoint_raises_checkpoint_not_found(
        self, backend: Any, checkpoint_id: str
    ) -> None:
        start(backend)

        with pytest.raises(CheckpointNotFound) as excinfo:
            backend.get(thread_id=THREAD, checkpoint_id=checkpoint_id)

        assert (excinfo.value.thread_id, excinfo.value.checkpoint_id) == (THREAD, checkpoint_id)

    def test_get_of_another_threads_checkpoint_raises_checkpoint_not_found(self, backend: Any) -> None:
        start(backend)
        _, other = start(backend, "thread-2")

        with pytest.raises(CheckpointNotFound):
            backend.get(thread_id=THREAD, checkpoint_id=other.id)

    def test_put_under_a_malformed_parent_id_raises_checkpoint_not_found(self, backend: Any) -> None:
        _, first = start(backend)

        with pytest.raises(CheckpointNotFound):
            backend.put(
                thread_id=THREAD,
                parent_id="not-a-uuid",
                expected_head=first.id,
                checkpoint=new(),
                status=ThreadStatus.RUNNING,
            )

        assert ids(backend.list(thread_id=THREAD)) == [first.id]


class BackendContract(ThreadsContract, StorageContract, RetentionContract, StoreContract, EncryptionContract):
    """Run against every backend; subclasses provide the `backend` fixture and the Hooks."""
