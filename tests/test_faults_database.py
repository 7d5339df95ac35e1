"""The database goes away: a worker whose connection is terminated mid-step retries the step and
the thread completes; web requests during an outage get a clear 503, never a traceback."""

import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from agents.examples.models import Refund
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest
from checkpoints.backends import get_backend
from checkpoints.models import Thread
from tests.factories import make_user
from tests.live import (
    LiveServices,
    Workers,
    approve_pending,
    free_port,
    history_is_one_chain,
    reach,
    start_thread,
    thread_status,
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
    approve_pending(thread_id)
    reach(thread_id, "done", reconcile=False)
    assert history_is_one_chain(thread_id)


@contextlib.contextmanager
def refunds_table_locked() -> Iterator[None]:
    """Hold, from another connection, a lock on the refunds table that blocks every insert."""
    locked, done = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute("LOCK TABLE examples_refund IN EXCLUSIVE MODE")
                locked.set()
                done.wait(60)
                cursor.execute("ROLLBACK")
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    assert locked.wait(10), "could not lock the refunds table"
    try:
        yield
    finally:
        done.set()
        holder.join()


@pytest.mark.slow
@pytest.mark.postgres_only
# The framework agents too: the OpenAI Agents SDK hands a tool's error to the model by default.
@pytest.mark.parametrize(
    "agent", ["refunds", "refunds_openai_agents", "refunds_pydantic_ai", "refunds_langgraph"]
)
def test_a_lock_timeout_inside_an_approved_refund_retries_the_step_and_refunds_once(
    agent: str, workers: Workers, live_services: LiveServices
) -> None:
    # PGOPTIONS (libpq): the worker's statements give up after 200 ms waiting for a lock.
    worker = workers.start("db-lock", {"THREAD_LEASE_S": "10", "PGOPTIONS": "-c lock_timeout=200"})
    thread_id = start_thread("Please refund order ORD-1002", agent=agent)
    reach(thread_id, "waiting", reconcile=False)

    with refunds_table_locked():
        approve_pending(thread_id)

        def timed_out_twice_or_failed() -> bool:
            timeouts = live_services.log_tail(worker, 400).count("lock timeout")
            return timeouts >= 2 or thread_status(thread_id) == "failed"

        wait_for(timed_out_twice_or_failed, timeout=20, message="the refund insert to time out twice")
        assert thread_status(thread_id) == "running"
        assert not Refund.objects.filter(thread_id=thread_id).exists()

    reach(thread_id, "done", reconcile=False, timeout=60)
    assert list(Refund.objects.filter(thread_id=thread_id).values_list("order_id", "amount_cents")) == [
        ("ORD-1002", 12999)
    ]
    assert Thread.objects.get(pk=thread_id).error == ""
    assert ApprovalRequest.objects.get(thread_id=thread_id).status == "approved"
    assert history_is_one_chain(thread_id)
    # The model read the refund, never the database error.
    tool_results = [
        m["content"] for m in get_backend().get(thread_id=thread_id).values["messages"] if m["role"] == "tool"
    ]
    assert any("issued" in content for content in tool_results)
    assert not any("error" in content.lower() for content in tool_results)


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
    ("get", "/", "text/plain; charset=utf-8"),
    ("get", "/threads/", "text/plain; charset=utf-8"),
    ("post", "/threads/", "text/plain; charset=utf-8"),
    ("get", "/approvals/1/", "text/plain; charset=utf-8"),
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
    assert response["Content-Type"] == kind
    text = response.content.decode()
    assert "database is unavailable" in text and "Traceback" not in text
    assert not [r for r in caplog.records if r.exc_info]  # logged as an outage, not as a crash


def test_healthz_is_503_and_names_the_database_while_it_is_down(client: Client) -> None:
    with database_down():
        response = client.get("/healthz")

    health = response.json()
    assert response.status_code == 503
    assert (health["ok"], health["database"]["ok"]) == (False, False)
    assert health["database"]["error"]


@pytest.mark.postgres_only
def test_a_step_that_cannot_get_a_pooled_connection_in_time_gets_an_error_it_retries() -> None:
    # The step worker's pool (DB_POOL_MAX_SIZE) hands a connection out within its timeout or
    # raises psycopg_pool's PoolTimeout, which Django raises as an OperationalError: retried.
    from django.db.backends.postgresql.base import DatabaseWrapper

    from agents.tasks import RETRYABLE

    pooled = {
        **connection.settings_dict,
        "CONN_MAX_AGE": 0,
        "OPTIONS": {
            **connection.settings_dict["OPTIONS"],
            "pool": {"min_size": 1, "max_size": 1, "timeout": 0.2},
        },
    }
    holder, waiter = DatabaseWrapper(pooled, alias="pool-test"), DatabaseWrapper(pooled, alias="pool-test")
    holder.ensure_connection()  # the pool's only connection
    try:
        with pytest.raises(RETRYABLE) as raised:
            waiter.ensure_connection()
        assert "couldn't get a connection after 0.20 sec" in str(raised.value)
    finally:
        holder.close()
        holder.close_pool()  # type: ignore[attr-defined]  # Django 5.1+, not in the stubs
