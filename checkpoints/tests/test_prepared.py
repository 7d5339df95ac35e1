"""The hot statements run as server-side prepared statements on Postgres: parsed once per
connection and, after Postgres' five custom plans, planned once."""

import pytest
from django.db import connection

from checkpoints.backends.orm import prepared

pytestmark = [pytest.mark.django_db, pytest.mark.postgres_only]

SQL = "SELECT id FROM checkpoints_thread WHERE id = %s"


def test_a_hot_statement_is_prepared_once_and_then_planned_no_more() -> None:
    for n in range(8):
        assert prepared.fetch_one(SQL, [f"no-such-thread-{n}"]) is None

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = %s",
            [SQL.replace("%s", "$1")],
        )
        assert cursor.fetchall() == [(3, 5)]  # one statement; its last three runs planned no more
