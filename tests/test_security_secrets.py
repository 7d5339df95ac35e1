"""No secret leaves the building: the model API key, the checkpoint encryption key, SECRET_KEY,
API tokens and the webhook's URL (which may carry a token) and signing secret appear in no log (at
DEBUG), no page, no API answer and no exported trace.

A web server and a worker of our own carry the secrets (others are paused); a refund runs through the
real SDK code path with a key set (the offline endpoint accepts any key) to completion, and its gate's
notification fails at a webhook receiver that is down, is retried and given up.
"""

import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from cryptography.fernet import Fernet
from django.test import Client
from pytest_django.fixtures import Settings

from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest
from tests.factories import make_user
from tests.live import (
    LiveServices,
    free_port,
    live_env,
    live_workers,
    log_dir,
    other_workers_paused,
    thread_status,
    wait_for,
    worker_node,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


class DownReceiver(BaseHTTPRequestHandler):
    """A webhook receiver that is down: 503 to every POST."""

    posts = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).posts += 1
        self.send_response(503)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def down_receiver() -> Iterator[int]:
    DownReceiver.posts = 0
    server = HTTPServer(("127.0.0.1", 0), DownReceiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_port
    server.shutdown()


@pytest.fixture
def secrets(down_receiver: int) -> dict[str, str]:
    # A secret in each place a webhook URL carries one: userinfo, a Slack-style path token, a query.
    hook = f"hook:pw-{uuid.uuid4().hex}@127.0.0.1:{down_receiver}/services/T0/B0/path-{uuid.uuid4().hex}"
    return {
        "OPENAI_API_KEY": f"sk-gatehouse-test-{uuid.uuid4().hex}",
        "SECRET_KEY": f"django-insecure-test-{uuid.uuid4().hex}",
        "CHECKPOINT_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "NOTIFY_WEBHOOK_URL": f"http://{hook}?token=query-{uuid.uuid4().hex}",
        "NOTIFY_WEBHOOK_SECRET": f"whsec-{uuid.uuid4().hex}",
    }


@pytest.fixture
def keyed(secrets: dict[str, str], settings: Settings, redis_ready: str) -> Iterator[LiveServices]:
    """Daphne and a worker started with the secrets, logging at DEBUG."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **live_env(port, f"gatehouse-secrets-{uuid.uuid4().hex[:8]}"),
        **secrets,
        "OPENAI_BASE_URL": f"{url}/offline/v1",
        "LOG_LEVEL": "DEBUG",
        # The gate's notification fails on this worker (not a notify worker of the session's), is
        # retried once and given up: each logs the failure.
        "GATEHOUSE_NOTIFIERS": "approvals.notifiers.webhook.WebhookNotifier",
        "NOTIFY_QUEUE": "",
        "NOTIFY_MAX_RETRIES": "1",
        "NOTIFY_RETRY_BASE_S": "0.2",
    }
    # This process reads what they write: same keys here.
    settings.CHECKPOINT_ENCRYPTION_KEY = secrets["CHECKPOINT_ENCRYPTION_KEY"]
    settings.OPENAI_API_KEY = secrets["OPENAI_API_KEY"]
    services = LiveServices(url=url, env=env)
    with other_workers_paused():
        try:
            services.start_web(port)
            debug = ["-m", "celery", "-A", "config", "worker", "-l", "debug", "-c", "1"]
            services.spawn("worker-secrets", [sys.executable, *debug, "-n", worker_node("secrets")])
            wait_for(lambda: worker_node("secrets") in live_workers(), timeout=30, message="the worker")
            yield services
        finally:
            services.stop_all()


def pages(client: Client, request_: ApprovalRequest) -> dict[str, str]:
    thread, cp = request_.thread_id, request_.checkpoint_id
    paths = [
        "/",
        "/threads/",
        f"/threads/{thread}/",
        f"/threads/{thread}/diff/",
        f"/threads/{thread}/checkpoints/{cp}/",
        f"/approvals/{request_.pk}/",
        "/ledger/",
        "/admin/approvals/auditevent/",
        "/admin/approvals/approvalrequest/",
        "/healthz",
    ]
    return {path: client.get(path).content.decode() for path in paths}


def test_no_key_or_token_appears_in_logs_pages_api_answers_or_exports(
    keyed: LiveServices, secrets: dict[str, str]
) -> None:
    ada = make_user("ada", "admin")
    ada.is_staff = ada.is_superuser = True
    ada.save()
    token = do_create_token(user=ada)
    seen: dict[str, str] = {}
    with httpx.Client(base_url=f"{keyed.url}/api", headers={"Authorization": f"Bearer {token}"}) as api:
        thread_id = api.post(
            "/threads", json={"agent": "refunds", "input": "Please refund order ORD-1001"}
        ).json()["id"]
        wait_for(lambda: thread_status(thread_id) == "waiting", timeout=30, message="the gate")
        # Before the decision: a notification of a decided request is not sent, so not retried.
        worker_log = log_dir() / "worker-secrets.log"
        wait_for(
            lambda: "giving up" in worker_log.read_text(errors="replace"), timeout=30, message="the webhook"
        )
        request_ = ApprovalRequest.objects.get(thread_id=thread_id)
        seen["decision"] = api.post(f"/approvals/{request_.pk}/decision", json={"decision": "approve"}).text
        wait_for(lambda: thread_status(thread_id) == "done", timeout=30, message="the refund")
        for path in (
            f"/threads/{thread_id}",
            f"/threads/{thread_id}/history",
            f"/threads/{thread_id}/export",
        ):
            response = api.get(path)
            assert response.status_code == 200, path
            seen[path] = response.text
    client = Client()
    client.force_login(ada)
    seen.update(pages(client, request_))
    seen.update({path.name: path.read_text(errors="replace") for path in logs(keyed)})

    assert "Refund of $42.50 issued" in seen[f"/threads/{thread_id}/export"]  # the trace is all there
    assert "DEBUG openai" in seen["worker-secrets.log"]  # the model client logged at DEBUG
    assert DownReceiver.posts == 2  # the webhook's failure was logged on a retry and on giving up
    leaks = [(where, name) for where, text in seen.items() for name, value in leaked(text, secrets, token)]
    assert leaks == []


def logs(services: LiveServices) -> list[Path]:
    return [path for path in services.logs.values() if path.parent == log_dir()]


def leaked(text: str, secrets: dict[str, str], token: str) -> list[tuple[str, Any]]:
    hook = urlsplit(secrets["NOTIFY_WEBHOOK_URL"])
    values = {
        **secrets,
        "API token": token,
        "API token body": token[10:],
        "webhook password": str(hook.password),
        "webhook path token": hook.path.rsplit("/", 1)[-1],
        "webhook query token": hook.query.removeprefix("token="),
    }
    return [(name, value) for name, value in values.items() if value in text]
