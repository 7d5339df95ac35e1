"""No secret leaves the building: the model API key, the checkpoint encryption key, SECRET_KEY and
API tokens appear in no log (at DEBUG), no page, no API answer and no exported trace.

A web server and a worker of our own carry the secrets (others are paused); a refund runs through the
real SDK code path with a key set (the offline endpoint accepts any key) to completion.
"""

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


@pytest.fixture
def secrets() -> dict[str, str]:
    return {
        "OPENAI_API_KEY": f"sk-gatehouse-test-{uuid.uuid4().hex}",
        "SECRET_KEY": f"django-insecure-test-{uuid.uuid4().hex}",
        "CHECKPOINT_ENCRYPTION_KEY": Fernet.generate_key().decode(),
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
    leaks = [(where, name) for where, text in seen.items() for name, value in leaked(text, secrets, token)]
    assert leaks == []


def logs(services: LiveServices) -> list[Path]:
    return [path for path in services.logs.values() if path.parent == log_dir()]


def leaked(text: str, secrets: dict[str, str], token: str) -> list[tuple[str, Any]]:
    values = {**secrets, "API token": token, "API token body": token[10:]}
    return [(name, value) for name, value in values.items() if value in text]
