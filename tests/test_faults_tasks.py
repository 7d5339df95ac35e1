"""Lost and duplicated step tasks: a step delivered twice runs once; tasks lost from the broker
are re-enqueued by the reconciler; no thread stays `running` with nobody working on it."""

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from django.utils import timezone
from pytest_django.fixtures import Settings

from agents import dispatch
from agents.examples.models import Refund
from agents.tasks import advance_thread_task, reconcile_threads_task
from checkpoints.models import Checkpoint, Thread
from tests.live import (
    ModelServer,
    Workers,
    approve_pending,
    history_is_one_chain,
    reach,
    start_thread,
    thread_status,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)

FAST = {"THREAD_LEASE_S": "4", "RECONCILE_INTERVAL_S": "1"}


@pytest.fixture
def model(settings: Settings) -> Iterator[ModelServer]:
    server = ModelServer()
    settings.OPENAI_BASE_URL = server.url  # for steps this process runs itself
    yield server
    server.close()


def head_of(thread_id: str) -> str:
    return str(Thread.objects.values_list("head_id", flat=True).get(pk=thread_id))


@pytest.mark.slow
def test_a_step_delivered_twice_at_once_or_late_runs_the_model_once(
    workers: Workers, model: ModelServer
) -> None:
    workers.start("single", {**FAST, "OPENAI_BASE_URL": model.url})
    model.hold()
    thread_id = start_thread("Please refund order ORD-1001")
    first = head_of(thread_id)
    wait_for(lambda: model.requests == 1, message="the worker to call the model")

    # The same task again while the first delivery is inside its model call, then once more late.
    assert advance_thread_task.apply(args=(thread_id, first)).get() == "busy"
    model.release()
    reach(thread_id, "waiting", reconcile=False)
    assert advance_thread_task.apply(args=(thread_id, first)).get() == "stale"  # late: dropped

    assert thread_status(thread_id) == "waiting"
    assert model.requests == 2  # one per model step: after the input, after the lookup
    assert history_is_one_chain(thread_id)


@pytest.mark.slow
def test_a_resume_delivered_three_times_issues_one_refund(workers: Workers) -> None:
    workers.start("pair", FAST, concurrency=2)
    thread_id = start_thread("Please refund order ORD-1002")
    reach(thread_id, "waiting", reconcile=False)
    gate = head_of(thread_id)

    approve_pending(thread_id)  # enqueues the resume on commit
    advance_thread_task.delay(thread_id, gate)
    advance_thread_task.delay(thread_id, gate)

    reach(thread_id, "done", reconcile=False)
    assert list(Refund.objects.values_list("order_id", flat=True)) == ["ORD-1002"]
    assert Checkpoint.objects.filter(parent_id=uuid.UUID(gate)).count() == 1
    assert history_is_one_chain(thread_id)


@pytest.mark.slow
def test_tasks_flushed_from_the_broker_are_recovered_by_the_reconciler(workers: Workers) -> None:
    workers.start("flushed", {**FAST, "OFFLINE_MODEL_DELAY_MS": "700"}, concurrency=2)
    threads = [start_thread(f"Please refund order ORD-100{n % 4 + 1}") for n in range(6)]
    wait_for(lambda: Checkpoint.objects.filter(thread_id__in=threads, step=1).exists(), timeout=20)

    broker = redis.Redis.from_url(django_settings.REDIS_URL)
    with broker:
        broker.flushdb()  # every queued step task, and the unacked ones, are gone

    for thread_id in threads:
        reach(thread_id, "waiting", timeout=60)
    assert not Thread.objects.filter(status="running").exists()
    assert all(history_is_one_chain(t) for t in threads)


def test_the_reconciler_resends_lost_steps_at_once_but_never_a_step_still_queued(
    monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    settings.RECONCILE_QUEUED_AFTER_S = 60
    enqueued: list[tuple[Any, ...]] = []
    monkeypatch.setattr(dispatch, "enqueue_step", lambda **step: enqueued.append(tuple(step.values())))
    now = timezone.now()
    lapsed = now - timedelta(seconds=3)
    died = make_thread("died", status="running", updated_at=now, owner="w1", lease_expires_at=lapsed)
    unsent = make_thread("unsent", status="running", updated_at=now, owner="unsent", lease_expires_at=lapsed)
    forgotten = make_thread("forgotten", status="running", updated_at=now - timedelta(seconds=90))
    make_thread("queued", status="running", updated_at=now - timedelta(seconds=30))  # behind a backlog
    held = now + timedelta(seconds=9)
    make_thread("leased", status="running", updated_at=now, owner="w2", lease_expires_at=held)
    make_thread("handing-off", status="running", updated_at=now, owner="w3", lease_expires_at=now)
    for status in ("waiting", "paused", "done", "failed", "cancelled"):
        make_thread(status, status=status, updated_at=now, owner="w4", lease_expires_at=lapsed)

    assert reconcile_threads_task() == 3
    assert sorted(enqueued) == sorted([(t, head_of(t)) for t in (died, unsent, forgotten)])
    # Each re-sent thread is queued afresh: the next passes do not echo it.
    assert reconcile_threads_task() == 0
    assert Thread.objects.get(pk=died).lease_owner == ""


def make_thread(
    thread_id: str, *, status: str, updated_at: Any, owner: str = "", lease_expires_at: Any = None
) -> str:
    from checkpoints.backends import get_backend
    from checkpoints.backends.base import NewCheckpoint
    from checkpoints.models import CheckpointSource

    get_backend().create_thread(
        thread_id=thread_id,
        agent="refunds",
        status=status,  # type: ignore[arg-type]
        first=NewCheckpoint(values={"messages": []}, source=CheckpointSource.INPUT, next=["model"]),
    )
    Thread.objects.filter(pk=thread_id).update(
        updated_at=updated_at, lease_owner=owner, lease_expires_at=lease_expires_at
    )
    assert thread_status(thread_id) == status
    return thread_id
