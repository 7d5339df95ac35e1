"""Redis down: a decision still commits to the database (no 500), and is acted on once Redis is
back (beat's reconciler re-enqueues the resume that could not be sent); an open inbox says
"live updates offline — reconnecting" and recovers by itself.

A private Redis server on a free port (the shared one is left alone), with its own web server,
worker and beat; a real chromium on the inbox.
"""

import shutil
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

from agents.examples.models import Refund
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest
from tests.browser import browser_fixture, log_in, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_user
from tests.live import LiveServices, PrivateRedis, free_port, live_env, log_dir, thread_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]

OFFLINE = "live updates offline — reconnecting"


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis()
    server.start()
    yield server
    server.stop()
    shutil.rmtree(settings.VAR_DIR / f"redis-{server.port}", ignore_errors=True)


@pytest.fixture
def stack(private_redis: PrivateRedis, redis_ready: str) -> Iterator[LiveServices]:
    """Daphne, a worker and beat, all on the private Redis, with a 1 s reconciler."""
    port = free_port()
    env = {
        **live_env(port, f"gatehouse-redis-down-{uuid.uuid4().hex[:8]}"),
        "REDIS_URL": private_redis.url,
        "RECONCILE_INTERVAL_S": "1",
        "THREAD_LEASE_S": "5",
    }
    services = LiveServices(url=f"http://127.0.0.1:{port}", env=env)
    try:
        services.start_web(port)
        celery = [sys.executable, "-m", "celery", "-A", "config"]
        command = [*celery, "worker", "-l", "info", "-n", "redis-down@%h", "-c", "1"]
        worker = services.spawn("worker-redis-down", command)
        wait_for(lambda: "ready." in log_text(services, worker), timeout=30, message="the worker")
        schedule = log_dir() / f"beat-{port}"
        services.spawn("beat-redis-down", [*celery, "beat", "-l", "info", "-s", str(schedule)])
        yield services
    finally:
        services.stop_all()


def log_text(services: LiveServices, process: Any) -> str:
    return services.logs[process.pid].read_text(errors="replace")


def api(services: LiveServices, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"{services.url}/api", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def test_a_decision_while_redis_is_down_commits_and_runs_once_redis_is_back_and_the_inbox_recovers(
    stack: LiveServices, private_redis: PrivateRedis, page: Page
) -> None:
    make_user("rita", "reviewer")
    token = do_create_token(user=make_user("ada", "admin"))
    with api(stack, token) as client:
        thread_id = client.post(
            "/threads", json={"agent": "refunds", "input": "Please refund order ORD-1001"}
        ).json()["id"]
        wait_for(lambda: thread_status(thread_id) == "waiting", timeout=30, message="the gate")
        log_in(page, stack.url, "rita")
        expect(page.locator("#live-status")).to_have_text("live")

        private_redis.stop()
        expect(page.locator("#live-status")).to_have_text(OFFLINE, timeout=15_000)
        request_ = ApprovalRequest.objects.get(thread_id=thread_id)
        decided = client.post(f"/approvals/{request_.pk}/decision", json={"decision": "approve"})

        assert decided.status_code == 200, decided.text
        assert decided.json()["status"] == "approved"
        assert thread_status(thread_id) == "running"  # committed; its step could not be enqueued
        assert Refund.objects.count() == 0

        private_redis.start()  # empty: whatever was queued is gone
        wait_for(lambda: thread_status(thread_id) == "done", timeout=60, message="the resumed thread")
        assert list(Refund.objects.values_list("order_id", flat=True)) == ["ORD-1001"]

        expect(page.locator("#live-status")).to_have_text("live", timeout=60_000)
        page.evaluate("window.__sameDocument = true")
        second = client.post("/threads", json={"agent": "refunds", "input": "Please refund order ORD-1002"})
        wait_for(lambda: thread_status(second.json()["id"]) == "waiting", timeout=30, message="a new gate")
        expect(page.locator("#inbox-list")).to_contain_text("ORD-1002", timeout=15_000)
        assert page.evaluate("window.__sameDocument") is True  # pushed live, not reloaded
