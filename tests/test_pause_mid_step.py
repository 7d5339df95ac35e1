"""Pause takes effect between steps, never mid-step: a step in flight when an operator pauses
commits its work and the thread then holds; resume continues from that head.

A real worker with a slow offline model (the step is in its model call when the pause lands),
and a lease shorter than the step, so the step only keeps its thread because the heartbeat
renews the lease."""

import time
from collections.abc import Iterator
from typing import Any

import pytest

from agents.actions import do_pause, do_resume
from agents.examples.models import Refund
from checkpoints.models import Checkpoint, Thread
from tests.live import ModelServer, Workers, approve_pending, reach, start_thread, thread_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SLOW_STEP = {"THREAD_LEASE_S": "1", "RECONCILE_INTERVAL_S": "1", "OFFLINE_MODEL_DELAY_MS": "2500"}


def steps(thread_id: str) -> int:
    return Checkpoint.objects.filter(thread_id=thread_id).count()


def test_a_pause_during_a_step_lets_it_commit_then_holds_until_resumed(workers: Workers) -> None:
    workers.start("slow", SLOW_STEP)
    thread_id = start_thread("Please refund order ORD-1001")
    wait_for(lambda: Thread.objects.get(pk=thread_id).lease_owner != "", timeout=20, message="the first step")

    paused = do_pause(thread_id, actor="user:tests")

    assert paused.status == "paused"  # at once, although a step is running
    assert steps(thread_id) == 1
    # The step in flight outlives its 1 s lease (the heartbeat keeps it), then commits.
    wait_for(lambda: steps(thread_id) == 2, timeout=20, message="the step in flight to commit")
    reach(thread_id, "paused", timeout=5)  # the reconciler finds nothing to re-run
    wait_for(lambda: Thread.objects.get(pk=thread_id).lease_owner == "", timeout=5)
    assert steps(thread_id) == 2  # and nothing ran after it
    assert Thread.objects.get(pk=thread_id).status == "paused"

    do_resume(thread_id, actor="user:tests")

    reach(thread_id, "waiting", timeout=30)
    assert [c.step for c in Checkpoint.objects.filter(thread_id=thread_id).order_by("step")] == [0, 1, 2, 3]


@pytest.fixture
def model(settings: Any) -> Iterator[ModelServer]:
    server = ModelServer()
    settings.OPENAI_BASE_URL = server.url
    yield server
    server.close()


def test_a_pause_during_the_step_that_opens_a_gate_holds_the_gated_action_until_resumed(
    workers: Workers, model: ModelServer
) -> None:
    # The second model call is the step that proposes issue_refund: hold it in flight.
    model.hold(after=1)
    workers.start("gate", {"OPENAI_BASE_URL": model.url})
    thread_id = start_thread("Please refund order ORD-1003")
    wait_for(lambda: model.requests == 2, timeout=20, message="the step that opens the gate")
    assert steps(thread_id) == 3  # input, the first model call, the lookup

    do_pause(thread_id, actor="user:tests")
    model.release()

    # The gate still opens (reviewers can decide), but the thread stays paused.
    wait_for(lambda: steps(thread_id) == 4, timeout=20, message="the gate-opening step to commit")
    wait_for(lambda: Thread.objects.get(pk=thread_id).lease_owner == "", timeout=5)
    assert thread_status(thread_id) == "paused"
    assert approve_pending(thread_id) == 1
    time.sleep(1.5)  # time enough for a wrongly enqueued resume to run the refund
    assert thread_status(thread_id) == "paused"
    assert not Refund.objects.filter(thread_id=thread_id).exists()

    do_resume(thread_id, actor="user:tests")

    reach(thread_id, "done", timeout=30)
    assert list(Refund.objects.filter(thread_id=thread_id).values_list("order_id", flat=True)) == ["ORD-1003"]
