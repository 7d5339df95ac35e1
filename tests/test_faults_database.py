"""The database goes away: a worker whose connection is terminated mid-step retries the step and
the thread completes; web requests during an outage get a clear 503, never a traceback."""

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from approvals.actions.tokens import do_create_token
from checkpoints.models import Thread
from tests.factories import make_user
from tests.live import (
    Workers,
    free_port,
    history_is_one_chain,
    reach,
    start_thread,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)

APP_NAME = "gatehouse-fault-db"


def terminate_backends(application_name: str) -> int:
    """pg_terminate_backend every connection of that application; return how many."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            [application_name],
        )
        return int(cursor.fetchone()[0])


@pytest.mark.slow
@pytest.mark.postgres_only
def test_a_step_whose_database_connection_is_terminated_retries_and_the_thread_completes(
    workers: Workers,
) -> None:
    # PGAPPNAME (libpq) labels the worker's connections so only they are cut.
    env = {"THREAD_LEASE_S": "30", "OFFLINE_MODEL_DELAY_MS": "1500", "PGAPPNAME": APP_NAME}
    workers.start("db-cut", env)
    thread_id = start_thread("Please refund order ORD-1003")

    def in_model_call() -> bool:  # leased while the head is still the input: inside the first step
        thread = Thread.objects.select_related("head").get(pk=thread_id)
        leased = bool(thread.lease_expires_at and thread.lease_expires_at > timezone.now())
        return leased and thread.head is not None and thread.head.step == 0

    wait_for(in_model_call, timeout=20, message="the worker to be inside its model call")
    assert terminate_backends(APP_NAME) >= 1

    reach(thread_id, "waiting", reconcile=False)
    assert Thread.objects.get(pk=thread_id).error == ""
    assert history_is_one_chain(thread_id)


@contextlib.contextmanager
def database_down() -> Iterator[None]:
    """Point this process's connection at nothing: every query fails to connect."""
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = str(Path("/nonexistent-dir/gatehouse.sqlite3"))
    else:
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()))
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


REQUESTS = [
    ("get", "/", "text/plain"),
    ("get", "/threads/", "text/plain"),
    ("post", "/threads/", "text/plain"),
    ("get", "/approvals/1/", "text/plain"),
    ("get", "/api/threads", "application/json"),
    ("get", "/api/approvals", "application/json"),
    ("post", "/api/threads", "application/json"),
    ("post", "/api/approvals/1/decision", "application/json"),
]


@pytest.mark.parametrize(("method", "path", "kind"), REQUESTS)
def test_requests_during_a_database_outage_get_a_clear_503(
    method: str, path: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    user = make_user("ada", "admin")
    token = do_create_token(user=user)
    client = Client(headers={"Authorization": f"Bearer {token}"})
    client.force_login(user)
    body = {"agent": "refunds", "input": "Please refund order ORD-1001", "decision": "approve"}

    with database_down(), caplog.at_level(logging.WARNING):
        response = getattr(client, method)(path, body, content_type="application/json")

    assert response.status_code == 503
    assert response["Content-Type"].startswith(kind)
    text = response.content.decode()
    assert "database is unavailable" in text and "Traceback" not in text
    assert not [r for r in caplog.records if r.exc_info]  # logged as an outage, not as a crash
