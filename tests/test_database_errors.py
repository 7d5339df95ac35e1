"""A database that cannot serve is a clear 503 ("database unavailable"); any other database error
is a fault in Gatehouse (a query, a migration not run), a 500 whose traceback is logged, never
passed off as an outage. Each error is provoked for real on the test database."""

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client

from approvals.actions.tokens import do_create_token
from checkpoints.models import Thread
from tests.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)

START = {"agent": "refunds", "input": "Please refund order ORD-1001"}


def api_client() -> Client:
    """An admin's API client that answers a crash with Django's 500, as a server does."""
    token = do_create_token(user=make_user("ada", "admin"))
    return Client(headers={"Authorization": f"Bearer {token}"}, raise_request_exception=False)


@contextlib.contextmanager
def session_options(options: str) -> Iterator[None]:
    """Open this process's next connections with these Postgres session settings."""
    saved = dict(connection.settings_dict["OPTIONS"])
    connection.close()
    connection.settings_dict["OPTIONS"] = {**saved, "options": options}
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["OPTIONS"] = saved


@contextlib.contextmanager
def table_locked(table: str) -> Iterator[None]:
    """Hold an exclusive lock on the table from another session until the block ends."""
    params: dict[str, Any] = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params) as other:
        other.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
        yield
        other.rollback()


def crashed(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info and r.name == "django.request"]


@pytest.mark.postgres_only
def test_a_read_only_database_is_a_503_and_nothing_is_written(caplog: pytest.LogCaptureFixture) -> None:
    # A standby, or a primary Postgres put in read-only mode, refuses every write (SQLSTATE 25006).
    client = api_client()

    with session_options("-c default_transaction_read_only=on"), caplog.at_level(logging.WARNING):
        response = client.post("/api/threads", START, content_type="application/json")

    assert response.status_code == 503
    assert response.json() == {
        "detail": "The database is unavailable right now. Nothing was changed; try again shortly.",
        "errors": None,
    }
    assert not crashed(caplog)
    assert not Thread.objects.exists()


@pytest.mark.postgres_only
def test_a_statement_canceled_by_its_timeout_is_a_logged_500_not_an_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The threads list waits on a lock another session holds until statement_timeout cancels it
    # (SQLSTATE 57014): the database is up, the query is what to look at.
    client = api_client()

    with (
        table_locked(Thread._meta.db_table),
        session_options("-c statement_timeout=100"),
        caplog.at_level(logging.WARNING),
    ):
        response = client.get("/api/threads")

    assert response.status_code == 500
    assert response.json() == {"detail": "Server Error: the failure is logged.", "errors": None}
    [record] = crashed(caplog)
    assert "statement timeout" in str(record.exc_info[1])  # type: ignore[index]


@contextlib.contextmanager
def table_missing(table: str) -> Iterator[None]:
    """Rename the table away (a migration not run) until the block ends."""
    with connection.cursor() as cursor:
        cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_away"')
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'ALTER TABLE "{table}_away" RENAME TO "{table}"')


@pytest.mark.parametrize(
    ("table", "path", "kind"),
    [
        (Thread._meta.db_table, "/api/threads", "application/json"),
        (Thread._meta.db_table, "/threads/", "text/html; charset=utf-8"),
        # The session loads before the view, in LoginRequiredMiddleware, which has its own catch.
        (Session._meta.db_table, "/threads/", "text/html; charset=utf-8"),
    ],
)
def test_a_missing_table_is_a_logged_500_not_an_outage(
    table: str, path: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    # SQLite reports "no such table" as an OperationalError, the class an outage raises too.
    client = api_client()
    client.force_login(make_user("bo", "admin"))

    with table_missing(table), caplog.at_level(logging.WARNING):
        response = client.get(path)

    assert response.status_code == 500
    assert response["Content-Type"] == kind
    assert "unavailable" not in response.content.decode()
    [record] = crashed(caplog)
    assert table in str(record.exc_info[1])  # type: ignore[index]
