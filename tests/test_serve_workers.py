"""`manage.py serve --only workers`, what a further host runs (README, "Performance"): its step
and resume workers take a thread from gate to done for a web server it did not start.

Real processes: the serve command and the workers it starts (every other worker paused), the
test suite's web server, Redis and the test database."""

import sys

import pytest

from checkpoints.models import Thread
from tests.live import (
    LiveServices,
    Workers,
    approve_pending,
    live_workers,
    reach,
    start_thread,
    wait_for,
    worker_node,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_serve_only_workers_runs_a_thread_through_its_gate_for_another_hosts_web_server(
    workers: Workers, live_services: LiveServices
) -> None:
    command = [sys.executable, "manage.py", "serve", "--only", "workers"]
    serve = live_services.spawn("serve-workers", command, {"STEP_WORKERS": "1", "STEP_CONCURRENCY": "4"})
    try:
        wait_for(
            lambda: {worker_node("worker1"), worker_node("resume")} <= live_workers(),
            timeout=30,
            interval=0.2,
            message=f"serve's workers to answer\n{live_services.log_tail(serve)}",
        )
        thread_id = start_thread("Please refund order ORD-1001")
        reach(thread_id, "waiting", reconcile=False)
        assert approve_pending(thread_id) == 1
        reach(thread_id, "done", reconcile=False)  # the resumed step: serve's resume worker
    finally:
        live_services.stop(serve)

    assert serve.returncode == 0
    output = live_services.log_tail(serve, lines=10_000)
    assert "worker1 |" in output and " notify |" in output
    # This host serves no pages and schedules nothing: one beat per deployment.
    assert "    web |" not in output and "   beat |" not in output
    assert Thread.objects.get(pk=thread_id).status == "done"
