"""A step that outlives its lease keeps it: the heartbeat renews it, and releases it at the end."""

import time

import pytest
from django.utils import timezone

from agents import llm
from agents.lease import held_lease
from agents.runtime import run_step
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import CheckpointSource, Thread, ThreadStatus

pytestmark = pytest.mark.django_db(transaction=True)  # the heartbeat writes from its own thread


def make_thread() -> str:
    thread, _ = get_backend().create_thread(
        thread_id="leased",
        agent="refunds",
        first=NewCheckpoint(values={}, source=CheckpointSource.INPUT, next=["model"]),
        status=ThreadStatus.RUNNING,
    )
    return thread.id


def test_a_step_longer_than_the_lease_still_holds_it_and_a_second_worker_is_kept_out() -> None:
    thread_id = make_thread()

    # A lease long enough that a busy machine's scheduling lag (once 0.16 s past a 0.3 s lease)
    # cannot outlast the heartbeat's slack; the step still outlives three of them.
    with held_lease(thread_id=thread_id, owner="w1", ttl_s=1.2) as held:
        assert held
        time.sleep(4.0)  # more than three leases
        row = Thread.objects.get(pk=thread_id)
        assert row.lease_owner == "w1"
        assert row.lease_expires_at is not None and row.lease_expires_at > timezone.now()
        with held_lease(thread_id=thread_id, owner="w2", ttl_s=0.3) as second:
            assert not second

    row = Thread.objects.get(pk=thread_id)
    assert (row.lease_owner, row.lease_expires_at) == ("", None)


def test_many_held_leases_are_renewed_by_one_heartbeat_thread_with_one_update() -> None:
    import threading
    from contextlib import ExitStack

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    ids = [
        get_backend()
        .create_thread(
            thread_id=f"leased-{n}",
            agent="refunds",
            first=NewCheckpoint(values={}, source=CheckpointSource.INPUT, next=["model"]),
            status=ThreadStatus.RUNNING,
        )[0]
        .id
        for n in range(20)
    ]
    with ExitStack() as stack:
        assert all(stack.enter_context(held_lease(thread_id=t, owner=f"w-{t}", ttl_s=0.6)) for t in ids)
        time.sleep(1.5)  # more than two leases
        rows = Thread.objects.filter(pk__in=ids)
        assert all(r.lease_expires_at is not None and r.lease_expires_at > timezone.now() for r in rows)
        beating = [t for t in threading.enumerate() if t.name.startswith("lease")]
        assert len(beating) == 1

        from agents.lease import _heartbeat

        with CaptureQueriesContext(connection) as queries:
            _heartbeat.renew()
        assert len([q for q in queries if q["sql"].startswith("UPDATE")]) == 1
    assert all(r.lease_owner == "" for r in Thread.objects.filter(pk__in=ids))


def test_a_step_sent_for_a_thread_deleted_since_ends_at_once_instead_of_waiting_for_its_lease() -> None:
    thread_id = make_thread()
    head = get_backend().get_thread(thread_id=thread_id).head_id
    get_backend().delete_thread(thread_id=thread_id)

    outcome = run_step(thread_id=thread_id, checkpoint_id=str(head), worker="w1")

    assert outcome.kind == "gone"  # not "busy": its task would retry for a lease nobody can take


def test_a_thread_deleted_while_its_step_waits_on_the_model_ends_the_step_with_nothing_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    thread_id = make_thread()
    head = get_backend().get_thread(thread_id=thread_id).head_id
    asked: list[str] = []

    def operator_deletes_the_thread_meanwhile(**kwargs: object) -> llm.ModelReply:
        asked.append(thread_id)
        get_backend().delete_thread(thread_id=thread_id)
        return llm.ModelReply(content="All done.", tool_calls=[], model="scripted")

    monkeypatch.setattr(llm, "complete", operator_deletes_the_thread_meanwhile)

    outcome = run_step(thread_id=thread_id, checkpoint_id=str(head), worker="w1")

    assert (outcome.kind, asked) == ("gone", [thread_id])
    assert not Thread.objects.filter(pk=thread_id).exists()
