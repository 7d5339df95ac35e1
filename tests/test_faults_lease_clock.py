"""Leases are timed by the database's clock, not by the clock of the process that takes, hands
off, renews or reconciles them: workers on several hosts share one database (README
"Performance"), and a host whose clock ran ahead took live leases, one behind kept dead ones
alive. Each test skews this process's clock (django.utils.timezone.now, what the lease code read)
ten minutes ahead or behind for one side of the lease, on the real database."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from agents import tasks
from agents.tasks import reconcile_threads_task
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import CheckpointSource, Thread, ThreadStatus

pytestmark = pytest.mark.django_db

SKEW = timedelta(minutes=10)
LEASE_S = 60


@pytest.fixture
def skewed(monkeypatch: pytest.MonkeyPatch) -> Callable[[timedelta], Any]:
    """skewed(offset): a block in which this process's clock reads offset from the true time."""
    true_now: Callable[[], datetime] = timezone.now

    @contextmanager
    def clock(offset: timedelta) -> Iterator[None]:
        monkeypatch.setattr(timezone, "now", lambda: true_now() + offset)
        try:
            yield
        finally:
            monkeypatch.setattr(timezone, "now", true_now)

    return clock


def make_thread(thread_id: str = "clocked") -> str:
    thread, _ = get_backend().create_thread(
        thread_id=thread_id,
        agent="refunds",
        first=NewCheckpoint(values={"messages": []}, source=CheckpointSource.INPUT, next=["model"]),
        status=ThreadStatus.RUNNING,
    )
    return thread.id


def committed_step(thread_id: str, *, owner: str) -> str:
    """A thread whose first step `owner` claimed and committed as agents.runtime._commit does
    (the commit hands the lease off and moves the head)."""
    make_thread(thread_id)
    backend = get_backend()
    head = head_of(thread_id)
    assert backend.claim(thread_id=thread_id, owner=owner, ttl_s=LEASE_S)
    with transaction.atomic():
        assert backend.hand_off(thread_id=thread_id, owner=owner)
        backend.put(
            thread_id=thread_id,
            parent_id=head,
            expected_head=head,
            checkpoint=NewCheckpoint(values={"messages": []}, source=CheckpointSource.STEP, next=["model"]),
            status=ThreadStatus.RUNNING,
        )
    return thread_id


def head_of(thread_id: str) -> str:
    head = get_backend().get_thread(thread_id=thread_id).head_id
    assert head is not None
    return head


def lease_owner(thread_id: str) -> str:
    return Thread.objects.values_list("lease_owner", flat=True).get(pk=thread_id)


def test_a_worker_whose_clock_runs_ahead_cannot_take_a_live_lease(skewed: Any) -> None:
    thread_id = make_thread()
    backend = get_backend()
    assert backend.claim(thread_id=thread_id, owner="w1", ttl_s=LEASE_S)

    with skewed(SKEW):
        assert backend.claim(thread_id=thread_id, owner="w2", ttl_s=LEASE_S) is None

    assert lease_owner(thread_id) == "w1"


@pytest.mark.parametrize("offset", [SKEW, -SKEW], ids=["holder ahead", "holder behind"])
def test_a_lease_taken_handed_on_and_renewed_by_a_skewed_worker_lasts_its_ttl(
    offset: timedelta, skewed: Any
) -> None:
    thread_id = make_thread()
    backend = get_backend()

    with skewed(offset):
        assert backend.claim(thread_id=thread_id, owner="w1", ttl_s=LEASE_S)
    assert backend.claim(thread_id=thread_id, owner="w2", ttl_s=LEASE_S) is None  # taken: live

    with skewed(offset):
        assert backend.renew(owners=["w1"], ttl_s=LEASE_S) == 1  # the heartbeat keeps it
        # A step whose task runs the next step itself keeps the lease in its commit.
        assert backend.hand_off(thread_id=thread_id, owner="w1", ttl_s=LEASE_S)
    assert backend.claim(thread_id=thread_id, owner="w2", ttl_s=LEASE_S) is None

    with skewed(offset):
        assert backend.hand_off(thread_id=thread_id, owner="w1")  # committed: lapses now
    assert backend.claim(thread_id=thread_id, owner="w2", ttl_s=LEASE_S)  # at once


def test_a_reconciler_whose_clock_runs_ahead_takes_no_live_lease_and_no_queued_step(
    skewed: Any, steps_sent: list[tuple[str, str]]
) -> None:
    leased = make_thread("leased")
    assert get_backend().claim(thread_id=leased, owner="w1", ttl_s=LEASE_S)
    make_thread("queued")  # its first step just handed to the broker

    with skewed(SKEW):
        assert reconcile_threads_task() == 0

    assert steps_sent == []
    assert lease_owner(leased) == "w1"


def test_a_reconciler_whose_clock_runs_behind_still_resends_a_dead_workers_step_and_a_lost_one(
    skewed: Any, steps_sent: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    monkeypatch.setattr(tasks, "HANDOFF_GRACE_S", 0)  # no wait for the hand-off's grace
    settings.RECONCILE_QUEUED_AFTER_S = 0  # nor for a queued step's
    died = committed_step("died", owner="w1")  # ... and w1 died before sending the next step
    lost = committed_step("lost", owner="w2")
    get_backend().release(thread_id=lost, owner="w2")  # sent its next step, which the broker lost

    with skewed(-SKEW):
        assert reconcile_threads_task() == 2

    assert sorted(steps_sent) == sorted((t, head_of(t)) for t in (died, lost))
    assert lease_owner(died) == ""


def test_a_step_committed_by_a_worker_whose_clock_runs_behind_is_not_taken_for_a_lost_one(
    skewed: Any, steps_sent: list[tuple[str, str]]
) -> None:
    """The queued rule compares like with like: updated_at is written by the database's clock
    too, so a commit's thread does not look RECONCILE_QUEUED_AFTER_S old at once."""
    thread_id = make_thread()
    backend = get_backend()
    head = backend.get_thread(thread_id=thread_id).head_id
    assert head is not None

    with skewed(-SKEW):
        backend.put(
            thread_id=thread_id,
            parent_id=head,
            expected_head=head,
            checkpoint=NewCheckpoint(values={"messages": []}, source=CheckpointSource.STEP, next=["model"]),
            status=ThreadStatus.RUNNING,
        )
    assert reconcile_threads_task() == 0

    with skewed(-SKEW):  # a person's resume (a web host's clock) sets it running
        backend.set_status(thread_id=thread_id, status=ThreadStatus.PAUSED)
        backend.set_status(thread_id=thread_id, status=ThreadStatus.RUNNING)
    assert reconcile_threads_task() == 0
    assert steps_sent == []
