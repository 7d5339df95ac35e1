"""The hot statements run as server-side prepared statements on Postgres: parsed once per
connection and, after Postgres' five custom plans, planned once."""

import os
import subprocess
import sys

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


@pytest.mark.parametrize(("setting", "threshold"), [(None, "5"), ("0", "None")])
def test_db_prepared_statements_0_turns_preparing_off_for_a_transaction_mode_pgbouncer(
    setting: str | None, threshold: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DB_PREPARED_STATEMENTS"}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            **({} if setting is None else {"DB_PREPARED_STATEMENTS": setting}),
        }
    )
    options = "settings.DATABASES['default']['OPTIONS']"
    read = f"from django.conf import settings; print({options}.get('prepare_threshold'))"
    out = subprocess.run([sys.executable, "-c", read], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == threshold
