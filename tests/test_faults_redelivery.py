"""A worker that dies after its step's COMMIT, before its on-commit enqueue of the next step,
leaves its lease handed off (lapsed) with its name still on it. The broker redelivers its task
(acks_late, reject_on_worker_lost) as a first delivery: it finds the head moved on (stale) and
releases the lease, which erased the reconciler's sign of a dead worker; the thread then looked
queued and waited RECONCILE_QUEUED_AFTER_S (120 s) for its next step. The stale task now sends
the head's follow-up itself when the lease it took was lapsed and still named; a stale duplicate
that found the lease released sends nothing (no echo). On the real database, through the runtime
and the backend as a worker uses them (tests/test_faults_worker.py kills a worker between its
commit and its enqueue and recovers it through the reconciler's lapsed rule)."""

import os
import signal
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.db import transaction

from agents.runtime import run_step
from agents.tasks import reconcile_threads_task
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import Checkpoint, CheckpointSource, Thread, ThreadStatus
from tests.live import TcpProxy, Workers, history_is_one_chain, pool_children, reach, start_thread, wait_for
from tests.test_faults_worker import SLOW, holding_lease, step_of_head

pytestmark = pytest.mark.django_db(transaction=True)  # run_step claims and releases in autocommit

DIED = "celery@node-a:task-1"  # the worker's owner name: its node and the task's id


def committed_step(*, owner: str) -> tuple[str, str, str]:
    """A thread whose first step `owner` claimed and committed as agents.runtime._commit does
    (the commit hands the lease off); nothing else: (thread id, the task's checkpoint, the head)."""
    backend = get_backend()
    thread, first = backend.create_thread(
        thread_id="redelivered",
        agent="refunds",
        first=NewCheckpoint(values={"messages": []}, source=CheckpointSource.INPUT, next=["model"]),
        status=ThreadStatus.RUNNING,
    )
    assert backend.claim(thread_id=thread.id, owner=owner, ttl_s=settings.THREAD_LEASE_S)
    with transaction.atomic():
        assert backend.hand_off(thread_id=thread.id, owner=owner)
        head = backend.put(
            thread_id=thread.id,
            parent_id=first.id,
            expected_head=first.id,
            checkpoint=NewCheckpoint(
                values={"messages": []}, source=CheckpointSource.STEP, next=["model"], node="model"
            ),
            status=ThreadStatus.RUNNING,
        )
    return thread.id, first.id, head.id


@pytest.mark.parametrize(
    "redelivered_to", [DIED, "celery@node-b:task-1"], ids=["the same worker node", "another worker node"]
)
def test_a_task_redelivered_after_its_worker_died_between_commit_and_enqueue_sends_the_next_step_at_once(
    redelivered_to: str, steps_sent: list[tuple[str, str]]
) -> None:
    thread_id, first, head = committed_step(owner=DIED)  # ... and the worker died here

    outcome = run_step(thread_id=thread_id, checkpoint_id=first, worker=redelivered_to)  # retried=False

    assert outcome.kind == "stale"
    assert steps_sent == [(thread_id, head)]  # at once, not RECONCILE_QUEUED_AFTER_S later
    row = Thread.objects.get(pk=thread_id)
    assert (row.lease_owner, row.lease_expires_at) == ("", None)  # released: the step can claim it
    assert reconcile_threads_task() == 0  # and it is queued, not re-sent again by the reconciler
    assert steps_sent == [(thread_id, head)]


def test_a_stale_duplicate_of_a_step_that_sent_its_follow_up_sends_nothing(
    steps_sent: list[tuple[str, str]],
) -> None:
    thread_id, first, _ = committed_step(owner=DIED)
    get_backend().release(thread_id=thread_id, owner=DIED)  # sent the next step, then released

    for worker in (DIED, "celery@node-b:task-1"):
        assert run_step(thread_id=thread_id, checkpoint_id=first, worker=worker).kind == "stale"

    assert steps_sent == []


@pytest.mark.slow
def test_a_pool_process_killed_after_its_commit_before_its_enqueue_gets_the_next_step_without_the_reconciler(
    workers: Workers,
) -> None:
    """The whole fault, in real processes: the worker's Redis link goes silent through a proxy
    (its step commits, then its enqueue hangs), its pool process is SIGKILLed, the link comes
    back and the worker requeues the task (reject_on_worker_lost): a first delivery, to the same
    node, under the same task id, that finds its head moved on. No reconciler runs."""
    redis = urlsplit(settings.REDIS_URL)
    proxy = TcpProxy(redis.port or 6379)
    redis_url = urlunsplit(redis._replace(netloc=f"127.0.0.1:{proxy.port}"))
    try:
        # One step per task (no chain), so the step after the commit must be sent through Redis.
        worker = workers.start("pool", {**SLOW, "REDIS_URL": redis_url, "STEP_CHAIN_S": "0"})
        thread_id = start_thread("Please refund order ORD-1004")
        wait_for(lambda: holding_lease(thread_id, head_source=CheckpointSource.INPUT), timeout=30)
        proxy.freeze()  # the step commits, then hangs on Redis
        wait_for(lambda: step_of_head(thread_id) == 1, timeout=30, message="the step to commit")
        [child] = pool_children(worker)
        os.kill(child, signal.SIGKILL)
        proxy.flowing.set()  # the link is back: the worker requeues the task
        reach(thread_id, "waiting", reconcile=False, timeout=20)  # was: RECONCILE_QUEUED_AFTER_S
    finally:
        proxy.close()

    assert worker.poll() is None
    assert Checkpoint.objects.filter(thread_id=thread_id, step=1).count() == 1
    assert history_is_one_chain(thread_id)
