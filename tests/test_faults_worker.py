"""A worker SIGKILLed mid-step: another worker finishes the thread from its last checkpoint, and
no side effect that finished is repeated (the refunds table holds one row per approved refund).

Real processes: Celery workers started for each test (others are paused), Redis, the test
database, and the offline model served by uvicorn, made slow for the doomed worker with
OFFLINE_MODEL_DELAY_MS. Short leases and reconcile intervals make recovery take seconds.
"""

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings as django_settings
from django.db import connection, transaction
from django.utils import timezone

from agents.examples.models import Refund
from approvals.models import ApprovalRequest
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint, CheckpointSource, PendingWrite, Thread
from tests.live import (
    LiveServices,
    TcpProxy,
    Workers,
    approve_pending,
    history_is_one_chain,
    pool_children,
    reach,
    start_thread,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LEASE_S = 4
FAST = {"THREAD_LEASE_S": str(LEASE_S), "RECONCILE_INTERVAL_S": "1"}
SLOW = {**FAST, "OFFLINE_MODEL_DELAY_MS": "2500"}


def holding_lease(thread_id: str, *, head_source: str) -> bool:
    """A worker claimed the thread after its head (of this source) was written: it is running the
    step after that head (not finishing the step that wrote it)."""
    thread = Thread.objects.select_related("head").get(pk=thread_id)
    if thread.head is None or thread.head.source != head_source or thread.lease_expires_at is None:
        return False
    claimed_at = thread.lease_expires_at - timedelta(seconds=LEASE_S)
    return claimed_at > thread.head.created_at and thread.lease_expires_at > timezone.now()


def refunds(thread_id: str) -> list[tuple[str, int]]:
    return list(Refund.objects.filter(thread_id=thread_id).values_list("order_id", "amount_cents"))


def test_a_worker_killed_during_the_model_call_after_a_refund_is_replaced_and_refunds_once(
    workers: Workers, live_services: LiveServices
) -> None:
    slow = workers.start("slow", SLOW)
    thread_id = start_thread("Please refund order ORD-1001")
    reach(thread_id, "waiting", reconcile=False)
    approve_pending(thread_id)
    # The refund is issued and committed with the resume checkpoint; the answer is being written.
    wait_for(lambda: holding_lease(thread_id, head_source=CheckpointSource.RESUME), timeout=30)
    assert refunds(thread_id) == [("ORD-1001", 4250)]

    live_services.kill(slow)
    workers.start("rescue", FAST)

    reach(thread_id, "done")
    assert refunds(thread_id) == [("ORD-1001", 4250)]
    assert history_is_one_chain(thread_id)
    final = get_backend().get(thread_id=thread_id).values
    assert "Refund of $42.50 issued" in final["messages"][-1]["content"]


def test_a_pool_process_killed_mid_step_is_redelivered_at_once_without_the_reconciler(
    workers: Workers,
) -> None:
    worker = workers.start("pool", SLOW)
    thread_id = start_thread("Please refund order ORD-1002")
    wait_for(lambda: holding_lease(thread_id, head_source=CheckpointSource.INPUT), timeout=30)

    [child] = pool_children(worker)
    os.kill(child, signal.SIGKILL)  # the main process sees the child die: reject_on_worker_lost

    reach(thread_id, "waiting", reconcile=False, timeout=30)
    assert worker.poll() is None
    assert history_is_one_chain(thread_id)


@pytest.mark.postgres_only
def test_a_worker_killed_between_two_refunds_of_one_step_keeps_the_first_and_issues_the_second(
    workers: Workers, live_services: LiveServices
) -> None:
    doomed = workers.start("doomed", FAST)
    thread_id = start_thread("Please refund orders ORD-1001 and ORD-1003")
    reach(thread_id, "waiting", reconcile=False)
    first, second = ApprovalRequest.objects.filter(thread_id=thread_id).order_by("pk")
    with hold_pending_write(thread_id, str(second.checkpoint_id), task_id=f"result:{second.key}"):
        approve_pending(thread_id)
        wait_for(lambda: refunds(thread_id), timeout=30, message="the first refund")
        assert refunds(thread_id) == [("ORD-1001", 4250)]
        wait_for(blocked_on_a_lock, timeout=10, message="the second refund to wait on our lock")
        live_services.kill(doomed)  # the second refund's transaction dies with the worker
    assert refunds(thread_id) == [("ORD-1001", 4250)]

    workers.start("rescue", FAST)

    reach(thread_id, "done")
    assert sorted(refunds(thread_id)) == [("ORD-1001", 4250), ("ORD-1003", 1999)]
    assert PendingWrite.objects.filter(checkpoint_id=first.checkpoint_id, kind="result").count() == 2
    assert history_is_one_chain(thread_id)


class _RolledBack(Exception):
    pass


@contextlib.contextmanager
def hold_pending_write(thread_id: str, checkpoint_id: str, *, task_id: str) -> Iterator[None]:
    """Write, uncommitted in another connection, the pending write a tool call will record: its
    insert then waits on ours, inside the transaction that issued its side effect."""
    written, done = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                if get_backend().put_write(
                    thread_id=thread_id, checkpoint_id=checkpoint_id, task_id=task_id, kind="result", value={}
                ):
                    written.set()
                done.wait(60)
                raise _RolledBack
        except _RolledBack:
            pass
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    assert written.wait(10), "could not write the pending write to hold"
    try:
        yield
    finally:
        done.set()
        holder.join()


def blocked_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock'"
        )
        return bool(cursor.fetchone()[0])


def test_a_worker_killed_after_its_commit_but_before_enqueueing_the_next_step_loses_nothing(
    workers: Workers, live_services: LiveServices
) -> None:
    redis = urlsplit(django_settings.REDIS_URL)
    proxy = TcpProxy(redis.port or 6379)
    redis_url = urlunsplit(redis._replace(netloc=f"127.0.0.1:{proxy.port}"))
    try:
        # One step per task (no chain), so the step after the commit must be sent through Redis.
        stuck = workers.start("stuck", {**SLOW, "REDIS_URL": redis_url, "STEP_CHAIN_S": "0"})
        thread_id = start_thread("Please refund order ORD-1004")
        wait_for(lambda: holding_lease(thread_id, head_source=CheckpointSource.INPUT), timeout=30)
        proxy.freeze()  # Redis goes silent for this worker: its step commits, then it hangs
        wait_for(lambda: step_of_head(thread_id) == 1, timeout=30, message="the step to commit")
        live_services.kill(stuck)
    finally:
        proxy.close()

    workers.start("rescue", FAST)

    reach(thread_id, "waiting")
    approve_pending(thread_id)
    reach(thread_id, "done")
    assert refunds(thread_id) == [("ORD-1004", 58000)]
    assert history_is_one_chain(thread_id)
    assert Checkpoint.objects.filter(thread_id=thread_id, step=1).count() == 1


def step_of_head(thread_id: str) -> int | None:
    head = Thread.objects.select_related("head").get(pk=thread_id).head
    return head.step if head else None


@pytest.mark.parametrize("agent", ["refunds_pydantic_ai", "refunds_langgraph", "refunds_openai_agents"])
def test_a_framework_agents_worker_killed_after_the_refund_is_replaced_and_refunds_once(
    agent: str, workers: Workers, live_services: LiveServices
) -> None:
    """The retry re-runs the resumed segment, the approved tool included (pydantic-ai and the
    OpenAI Agents SDK run it again; LangGraph re-runs the interrupted node from its start);
    run_once returns the recorded refund instead of issuing a second one."""
    slow = workers.start("slow", SLOW)
    thread_id = start_thread("Please refund order ORD-1001", agent=agent)
    reach(thread_id, "waiting", reconcile=False)
    approve_pending(thread_id)
    # The refund is issued (and recorded at the gate's checkpoint); the slow report is being written.
    wait_for(lambda: refunds(thread_id) == [("ORD-1001", 4250)], timeout=30)
    assert Thread.objects.get(pk=thread_id).status == "running"

    live_services.kill(slow)
    workers.start("rescue", FAST)

    reach(thread_id, "done")
    assert refunds(thread_id) == [("ORD-1001", 4250)]
    assert history_is_one_chain(thread_id)
    final = get_backend().get(thread_id=thread_id).values
    assert "Refund of $42.50 issued" in final["messages"][-1]["content"]
