"""Recovery in seconds, and no echo: at the default lease and reconciler interval a dead worker's
thread resumes within 20 s; a step that outlives its lease keeps it; the reconciler never re-sends
a step that merely queues behind a backlog.

Real processes: Celery workers started by each test (others paused), Redis, the test database, a
model server in the test process (tests.live.ModelServer). The test process runs the reconciler
the way beat would, every RECONCILE_INTERVAL_S."""

import time
from collections.abc import Iterator

import pytest
from django.conf import settings as django_settings
from pytest_django.fixtures import Settings

from agents.tasks import reconcile_threads_task
from checkpoints.models import Thread
from tests.live import LiveServices, ModelServer, Workers, history_is_one_chain, reach, start_thread, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def model(settings: Settings) -> Iterator[ModelServer]:
    server = ModelServer()
    settings.OPENAI_BASE_URL = server.url
    yield server
    server.close()


def test_a_killed_workers_thread_resumes_within_20_s_at_the_default_settings(
    workers: Workers, live_services: LiveServices, model: ModelServer, settings: Settings
) -> None:
    settings.RECONCILE_QUEUED_AFTER_S = 120  # the default: the lost step must be told by its lease
    assert (django_settings.THREAD_LEASE_S, django_settings.RECONCILE_INTERVAL_S) == (10, 5)
    doomed = workers.start("doomed", {"OPENAI_BASE_URL": model.url})
    model.hold()
    thread_id = start_thread("Please refund order ORD-1001")
    wait_for(lambda: model.requests == 1, message="the worker to call the model")

    live_services.kill(doomed)
    killed_at = time.monotonic()
    workers.start("rescue", {"OPENAI_BASE_URL": model.url})
    next_pass = killed_at
    while model.requests < 2 and time.monotonic() - killed_at < 40:
        if time.monotonic() >= next_pass:  # beat's schedule
            reconcile_threads_task()
            next_pass += settings.RECONCILE_INTERVAL_S
        time.sleep(0.1)
    resumed_after = time.monotonic() - killed_at

    print(f"resumed {resumed_after:.1f} s after the kill")
    assert model.requests == 2
    assert resumed_after <= 20
    model.release()
    reach(thread_id, "waiting")
    assert history_is_one_chain(thread_id)


def test_a_model_call_longer_than_the_lease_keeps_the_lease_while_the_reconciler_runs(
    workers: Workers, model: ModelServer
) -> None:
    workers.start("slow", {"THREAD_LEASE_S": "2", "OPENAI_BASE_URL": model.url})
    model.hold()
    thread_id = start_thread("Please refund order ORD-1002")
    wait_for(lambda: model.requests == 1, message="the worker to call the model")

    deadline = time.monotonic() + 7  # three and a half leases
    while time.monotonic() < deadline:
        assert reconcile_threads_task() == 0
        time.sleep(0.5)
    model.release()

    reach(thread_id, "waiting", reconcile=False)
    assert model.requests == 2  # one per model step: the held call was never run twice
    assert history_is_one_chain(thread_id)


def test_a_backlog_on_one_worker_gets_no_echo_from_the_reconciler(
    workers: Workers, settings: Settings
) -> None:
    settings.RECONCILE_QUEUED_AFTER_S = 120
    workers.start("alone", {"OFFLINE_MODEL_DELAY_MS": "300"})
    threads = [start_thread(f"Please refund order ORD-100{n % 4 + 1}") for n in range(30)]

    resent = 0

    def all_waiting() -> bool:
        nonlocal resent
        resent += reconcile_threads_task()
        return not Thread.objects.filter(pk__in=threads).exclude(status="waiting").exists()

    wait_for(all_waiting, timeout=120, interval=1, message="every thread to reach its gate")
    print(f"re-sent {resent} steps for {len(threads) * 2} steps")
    assert resent == 0


def test_a_step_that_finds_the_lease_busy_keeps_retrying_until_it_lapses_without_the_reconciler(
    workers: Workers,
) -> None:
    from checkpoints.backends import get_backend

    thread_id = start_thread("Please refund order ORD-1003")  # queued: no worker of ours yet
    # Another worker holds the lease for longer than five one-second retries, then dies.
    assert get_backend().claim(thread_id=thread_id, owner="elsewhere", ttl_s=9)
    workers.start("patient", {})

    reach(thread_id, "waiting", reconcile=False, timeout=40)
    assert history_is_one_chain(thread_id)
