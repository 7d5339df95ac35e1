"""Every checkpoint backend against the shared contract, plus the ORM's behaviour under real concurrency."""

import threading
from datetime import datetime
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from checkpoints.backends.base import CheckpointData, HeadConflict, ThreadExists, ThreadNotFound
from checkpoints.backends.memory import MemoryBackend
from checkpoints.backends.orm import OrmBackend
from checkpoints.models import Checkpoint, PendingWrite, StoredValue, StoreItem, ThreadStatus
from checkpoints.tests.contract import THREAD, BackendContract, new, put_after, start
from checkpoints.tests.helpers import conversation, message, write

ROUNDS = 10


class TestMemoryBackend(BackendContract):
    @pytest.fixture
    def backend(self) -> MemoryBackend:
        return MemoryBackend()

    def corrupt(self, backend: MemoryBackend, thread_id: str, checkpoint_id: str) -> None:
        backend._checkpoints[thread_id][checkpoint_id].refs = {"tampered": ["i", True]}

    def stored_values(self, backend: MemoryBackend, thread_id: str) -> dict[bytes, str]:
        return {key: data for key, (_, data) in backend._values.get(thread_id, {}).items()}

    def tamper(self, backend: MemoryBackend, thread_id: str, key: bytes, data: str) -> None:
        prev, _ = backend._values[thread_id][key]
        backend._values[thread_id][key] = (prev, data)

    def delete_row(self, backend: MemoryBackend, thread_id: str, key: bytes) -> None:
        del backend._values[thread_id][key]

    def stored_texts(self, backend: MemoryBackend) -> list[str]:
        values = [data for rows in backend._values.values() for _, data in rows.values()]
        writes = [data for rows in backend._writes.values() for _, data in rows.values()]
        return values + writes + [entry.data for entry in backend._store.values()]

    def backdate(
        self, backend: MemoryBackend, thread_id: str, checkpoint_id: str, created_at: datetime
    ) -> None:
        stored = backend._checkpoints[thread_id][checkpoint_id]
        stored.summary = type(stored.summary)(**{**vars(stored.summary), "created_at": created_at})


@pytest.mark.django_db
class TestOrmBackend(BackendContract):
    @pytest.fixture
    def backend(self) -> OrmBackend:
        return OrmBackend()

    def corrupt(self, backend: OrmBackend, thread_id: str, checkpoint_id: str) -> None:
        Checkpoint.objects.filter(pk=checkpoint_id, thread_id=thread_id).update(
            refs={"tampered": ["i", True]}
        )

    def stored_values(self, backend: OrmBackend, thread_id: str) -> dict[bytes, str]:
        rows = StoredValue.objects.filter(thread_id=thread_id).values_list("key", "data")
        return {bytes(key): data for key, data in rows}

    def tamper(self, backend: OrmBackend, thread_id: str, key: bytes, data: str) -> None:
        assert StoredValue.objects.filter(thread_id=thread_id, key=key).update(data=data) == 1

    def delete_row(self, backend: OrmBackend, thread_id: str, key: bytes) -> None:
        assert StoredValue.objects.filter(thread_id=thread_id, key=key).delete()[0] == 1

    def stored_texts(self, backend: OrmBackend) -> list[str]:
        models = (StoredValue, PendingWrite, StoreItem)
        return [data for model in models for data in model.objects.values_list("data", flat=True)]

    def backdate(self, backend: OrmBackend, thread_id: str, checkpoint_id: str, created_at: datetime) -> None:
        Checkpoint.objects.filter(pk=checkpoint_id).update(created_at=created_at)


# --- the ORM backend's own behaviour ------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("items", [10, 200])
def test_orm_loading_a_head_takes_two_queries_whatever_its_length(items: int) -> None:
    backend = OrmBackend()
    conversation(backend, items=items, size=100)
    backend.layouts.clear()

    with CaptureQueriesContext(connection) as queries:
        loaded = backend.get(thread_id=THREAD)

    assert len(loaded.values["messages"]) == items
    assert len(queries) == 2


@pytest.mark.django_db
def test_orm_writing_a_checkpoint_takes_one_statement_on_postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("elsewhere a write is three statements in a transaction")
    backend = OrmBackend()
    head = conversation(backend, items=3, size=100)[-1]

    with CaptureQueriesContext(connection) as queries:
        write(backend, head, {"messages": [*head.values["messages"], message(3)]})

    assert len(queries) == 1


@pytest.mark.django_db
def test_orm_a_parent_this_process_has_not_seen_is_read_from_the_database() -> None:
    head = conversation(OrmBackend(), items=5, size=100)[-1]
    fresh = OrmBackend()  # another worker: an empty cache

    written = write(fresh, head, {"messages": [*head.values["messages"], message(5)]})

    assert fresh.get(thread_id=THREAD).values == written.values
    assert StoredValue.objects.filter(thread_id=THREAD).count() == 6


@pytest.mark.django_db
def test_orm_items_stored_outside_their_run_are_still_found() -> None:
    backend = OrmBackend()
    head = conversation(backend, items=6, size=100)[-1]
    StoredValue.objects.filter(thread_id=THREAD, depth=3).update(run=12345)  # as if another writer stored it

    assert backend.get(thread_id=THREAD).values == head.values


@pytest.mark.django_db
def test_orm_deleting_a_thread_leaves_no_rows() -> None:
    backend = OrmBackend()
    head = conversation(backend, items=4, size=100)[-1]
    backend.put_write(thread_id=THREAD, checkpoint_id=head.id, task_id="t", kind="result", value=1)

    backend.delete_thread(thread_id=THREAD)

    assert not StoredValue.objects.exists()
    assert not Checkpoint.objects.exists()
    assert not PendingWrite.objects.exists()


@pytest.mark.django_db
def test_orm_storage_bytes_counts_the_threads_rows() -> None:
    backend = OrmBackend()
    conversation(backend, items=5, size=1000)

    assert 5000 < backend.storage_bytes(thread_id=THREAD) < 10_000


@pytest.mark.django_db
def test_orm_a_taken_thread_id_inside_a_transaction_writes_nothing_and_leaves_the_transaction_usable() -> (
    None
):
    backend = OrmBackend()
    start(backend)

    with transaction.atomic():
        with CaptureQueriesContext(connection) as queries, pytest.raises(ThreadExists):
            start(backend, agent="outreach")
        _, other = start(backend, thread_id="t-other")  # the same transaction goes on

    assert not [q for q in queries.captured_queries if "SAVEPOINT" in q["sql"]]
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["INSERT"]  # nothing after it
    assert backend.get_thread(thread_id=THREAD).agent == "refunds"
    assert backend.get_thread(thread_id="t-other").head_id == other.id


@pytest.mark.django_db(transaction=True)
def test_orm_lock_thread_returns_the_thread_as_get_thread_does_and_needs_a_transaction() -> None:
    backend = OrmBackend()
    thread, _ = start(backend)
    with transaction.atomic():
        assert backend.lock_thread(thread_id=THREAD) == backend.get_thread(thread_id=THREAD) == thread
        with pytest.raises(ThreadNotFound):
            backend.lock_thread(thread_id="nope")
    with pytest.raises(TransactionManagementError):
        backend.lock_thread(thread_id=THREAD)


@pytest.mark.django_db
def test_orm_put_after_lock_thread_works_inside_a_transaction() -> None:
    backend = OrmBackend()
    _, first = start(backend)

    with transaction.atomic():
        thread = backend.lock_thread(thread_id=THREAD)
        written = put_after(backend, first, expected_head=thread.head_id)

    assert backend.get_thread(thread_id=THREAD).head_id == written.id


@pytest.mark.django_db(transaction=True)
def test_orm_head_conflict_inside_a_transaction_rolls_back_only_the_put() -> None:
    backend = OrmBackend()
    _, first = start(backend)
    second = put_after(backend, first)

    with transaction.atomic():
        backend.lock_thread(thread_id=THREAD)
        with pytest.raises(HeadConflict):
            put_after(backend, first, expected_head=first.id)
        third = put_after(backend, second)

    assert backend.get_thread(thread_id=THREAD).head_id == third.id
    assert [c.id for c in backend.list(thread_id=THREAD)] == [third.id, second.id, first.id]


def race(backend: OrmBackend, head: CheckpointData, *, round: int) -> list[Any]:
    """Two threads put under the same head at once; return what each got (an id or an exception)."""
    barrier = threading.Barrier(2)
    outcomes: list[Any] = []

    def writer(n: int) -> None:
        try:
            barrier.wait(timeout=10)
            with transaction.atomic():
                written = backend.put(
                    thread_id=head.thread_id,
                    parent_id=head.id,
                    expected_head=head.id,
                    checkpoint=new({"n": n, "messages": [message(round * 10 + n, 100)]}),
                    status=ThreadStatus.RUNNING,
                )
            outcomes.append(written.id)
        except Exception as exc:
            outcomes.append(exc)
        finally:
            connection.close()

    writers = [threading.Thread(target=writer, args=(n,)) for n in (1, 2)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(timeout=60)
    return outcomes


@pytest.mark.django_db(transaction=True)
def test_orm_concurrent_puts_from_one_head_commit_exactly_one() -> None:
    backend = OrmBackend()
    _, head = start(backend)

    for round in range(ROUNDS):
        outcomes = race(backend, head, round=round)

        conflicts = [o for o in outcomes if isinstance(o, HeadConflict)]
        winners = [o for o in outcomes if isinstance(o, str)]
        assert len(outcomes) == 2, outcomes
        assert (len(winners), len(conflicts)) == (1, 1), outcomes
        head = backend.get(thread_id=THREAD)
        assert head.id == winners[0]

    chain = backend.list(thread_id=THREAD)
    assert len(chain) == ROUNDS + 1
    assert sorted(c.step for c in chain) == list(range(ROUNDS + 1))
    by_step = {c.step: c for c in chain}
    assert all(by_step[step].parent_id == by_step[step - 1].id for step in range(1, ROUNDS + 1))
    # The loser wrote nothing: one message row per winner.
    assert StoredValue.objects.filter(thread_id=THREAD).count() == ROUNDS
