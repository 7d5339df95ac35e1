"""The thread-pool step worker and the resume queue: many steps in flight per process, a
SIGKILLed worker's steps all recovered, and a person's step ahead of new threads' steps.

Real processes: Celery workers started for each test (others are paused), Redis, the test
database and the offline model served by uvicorn."""

import time

import pytest

from checkpoints.models import CheckpointSource, Thread
from config.celery import app
from tests.live import (
    LiveServices,
    Workers,
    approve_pending,
    history_is_one_chain,
    reach,
    start_thread,
    wait_for,
    worker_node,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LEASE_S = 4
FAST = {"THREAD_LEASE_S": str(LEASE_S), "RECONCILE_INTERVAL_S": "1"}
POOLED = {**FAST, "DB_POOL_MAX_SIZE": "2"}  # fewer connections than steps in flight (ignored on SQLite)


def leased(ids: list[str]) -> int:
    return Thread.objects.filter(pk__in=ids, lease_owner__gt="").count()


def test_a_thread_pool_worker_runs_many_steps_at_once_and_a_sigkill_loses_none_of_them(
    workers: Workers, live_services: LiveServices
) -> None:
    doomed = workers.start("threads", {**POOLED, "OFFLINE_MODEL_DELAY_MS": "3000"}, 20, pool="threads")
    ids = [start_thread(f"Please refund order ORD-100{1 + n % 4}") for n in range(8)]
    # All eight wait on the model together in one process (two pooled connections).
    wait_for(lambda: leased(ids) == 8, timeout=30, message="eight steps in flight at once")

    live_services.kill(doomed)  # every in-flight step dies at once; Redis keeps them unacked
    killed = time.monotonic()
    workers.start("rescue", POOLED, 20, pool="threads")

    for thread_id in ids:
        reach(thread_id, "waiting", timeout=60)  # the reconciler re-sends them once leases expire
    assert time.monotonic() - killed < LEASE_S + 20
    assert all(history_is_one_chain(thread_id) for thread_id in ids)


def test_a_decisions_step_goes_to_the_resume_queue_ahead_of_the_steps_queue(workers: Workers) -> None:
    workers.start("steps", FAST, 2)
    thread_id = start_thread("Please refund order ORD-1001")
    reach(thread_id, "waiting", reconcile=False)
    # The steps' queue is no longer served (as if a backlog of new threads filled it).
    node = worker_node("steps")
    app.control.cancel_consumer(app.conf.task_default_queue, destination=[node], reply=True, timeout=2)

    approve_pending(thread_id)

    wait_for(
        lambda: Thread.objects.get(pk=thread_id).head.source == CheckpointSource.RESUME,  # type: ignore[union-attr]
        timeout=30,
        message="the resumed step to run from the resume queue",
    )
    # It ran alone: the step after it waits on the steps' queue, not on the resume queue's
    # few threads (chaining steps there would call the model from them).
    time.sleep(1)
    thread = Thread.objects.select_related("head").get(pk=thread_id)
    assert (thread.status, thread.head.source) == ("running", CheckpointSource.RESUME)  # type: ignore[union-attr]
