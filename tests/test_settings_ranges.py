"""Every number setting has a range: a value outside it (a negative timeout, a zero pool, a port
past 65535) stops start-up with an error naming the variable, the value and the range, as a value
that is not a number does, instead of a worker, a pool or a throttle quietly misbehaving. The
SMTP login and encryption Django's email framework needs are read too."""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from tests.factories import settings_read_with

# Postgres, so the connection settings only it reads are read too (nothing connects).
ON_POSTGRES = {"DATABASE_URL": "postgres://gatehouse@db.invalid:5432/gatehouse"}

# (variable, a value out of its range, the range the error states)
OUT_OF_RANGE = [
    ("PORT", "0", "from 1 to 65535"),
    ("PORT", "70000", "from 1 to 65535"),
    ("EMBEDDED_REDIS_PORT", "-5", "from 1 to 65535"),
    ("EMAIL_PORT", "65536", "from 1 to 65535"),
    ("DB_CONN_MAX_AGE", "-1", "at least 0"),
    ("DB_POOL_MAX_SIZE", "-2", "at least 0"),
    ("LIVE_REJOIN_S", "0", "from 1 to 3600"),
    ("LIVE_REJOIN_S", "90000", "from 1 to 3600"),
    ("CELERY_VISIBILITY_TIMEOUT", "0", "at least 1"),
    ("RECONCILE_INTERVAL_S", "0", "at least 1"),
    ("RECONCILE_QUEUED_AFTER_S", "-120", "at least 1"),
    ("THREAD_LEASE_S", "0", "at least 1"),
    ("STEP_CONCURRENCY", "0", "at least 1"),
    ("STEP_WORKERS", "0", "at least 1"),
    ("STEP_DB_POOL_SIZE", "0", "at least 1"),
    ("RESUME_CONCURRENCY", "0", "at least 1"),
    ("RESUME_DB_POOL_SIZE", "0", "at least 1"),
    ("WEB_DB_POOL_SIZE", "-8", "at least 1"),
    ("STEP_CHAIN_S", "-1", "at least 0"),
    ("MAX_STEPS_PER_THREAD", "0", "at least 1"),
    ("CHECKPOINT_PRUNE_INTERVAL_S", "0", "at least 1"),
    ("OFFLINE_MODEL_DELAY_MS", "-1", "from 0 to 120000"),
    ("OFFLINE_MODEL_DELAY_MS", "200000", "from 0 to 120000"),
    ("MAX_REQUEST_BYTES", "0", "at least 1"),
    ("MAX_INPUT_CHARS", "-1", "at least 1"),
    ("MAX_STATE_BYTES", "0", "at least 1"),
    ("LOGIN_FAILURES_PER_USER", "0", "at least 1"),
    ("LOGIN_FAILURES_PER_IP", "0", "at least 1"),
    ("LOGIN_FAILURE_WINDOW_S", "0", "at least 1"),
    ("CLAIM_IDLE_S", "-900", "at least 1"),
    ("INBOX_SWEEP_INTERVAL_S", "0", "at least 1"),
    ("NOTIFY_CONCURRENCY", "0", "at least 1"),
    ("NOTIFY_DB_POOL_SIZE", "0", "at least 1"),
    ("NOTIFY_MAX_RETRIES", "-1", "at least 0"),
    ("NOTIFY_RESEND_AFTER_S", "0", "at least 1"),
    ("EMAIL_TIMEOUT", "0", "at least 1"),
    ("OPENAI_TIMEOUT_S", "-1", "greater than 0"),
    ("OPENAI_TIMEOUT_S", "0", "greater than 0"),
    ("NOTIFY_RETRY_BASE_S", "0", "greater than 0"),
    ("DECISION_UNDO_S", "-5", "at least 0"),
    ("LANGGRAPH_RUN_WAIT_S", "-0.5", "at least 0"),
]


@pytest.mark.parametrize(("name", "value", "wanted"), OUT_OF_RANGE)
def test_a_number_setting_out_of_its_range_is_a_configuration_error_naming_it_the_value_and_the_range(
    name: str, value: str, wanted: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ImproperlyConfigured) as error:
        settings_read_with(monkeypatch, **ON_POSTGRES, **{name: value})

    assert str(error.value) == f"{name} must be {wanted}, got {value!r}"


# (variable, where settings keep it, the edges of its range: each is accepted as it is)
EDGES = [
    ("PORT", "PORT", ["1", "65535"]),
    ("DB_POOL_MAX_SIZE", "DB_POOL_MAX_SIZE", ["0"]),  # no pool
    ("STEP_CHAIN_S", "STEP_CHAIN_S", ["0"]),  # one step a task
    ("NOTIFY_MAX_RETRIES", "NOTIFY_MAX_RETRIES", ["0"]),
    ("OFFLINE_MODEL_DELAY_MS", "OFFLINE_MODEL_DELAY_MS", ["0", "120000"]),
    ("LIVE_REJOIN_S", "LIVE_REJOIN_S", ["1", "3600"]),
    ("THREAD_LEASE_S", "THREAD_LEASE_S", ["1"]),
    ("MAX_REQUEST_BYTES", "DATA_UPLOAD_MAX_MEMORY_SIZE", ["1"]),
    ("DECISION_UNDO_S", "DECISION_UNDO_S", ["0"]),  # at once
    ("OPENAI_TIMEOUT_S", "OPENAI_TIMEOUT_S", ["0.5"]),
    ("LANGGRAPH_RUN_WAIT_S", "LANGGRAPH_RUN_WAIT_S", ["0"]),
]


@pytest.mark.parametrize(("name", "setting", "values"), EDGES)
def test_a_number_setting_at_the_edge_of_its_range_is_taken_as_set(
    name: str, setting: str, values: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for value in values:
        read = settings_read_with(monkeypatch, **ON_POSTGRES, **{name: value})
        assert read[setting] == float(value), (name, value)


def test_every_default_is_inside_its_range(monkeypatch: pytest.MonkeyPatch) -> None:
    unset = {name: None for name, _, _ in OUT_OF_RANGE}
    read = settings_read_with(monkeypatch, **ON_POSTGRES, **unset)  # raises if a default were out of range

    assert read["PORT"] == 8000 and read["OPENAI_TIMEOUT_S"] == 60.0 and read["LIVE_REJOIN_S"] == 5


def test_manage_py_stops_at_start_up_with_the_error_naming_the_setting() -> None:
    env = {**os.environ, "STEP_DB_POOL_SIZE": "0"}
    command = [sys.executable, "manage.py", "check"]

    done = subprocess.run(command, cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=60)

    assert done.returncode != 0
    assert "ImproperlyConfigured: STEP_DB_POOL_SIZE must be at least 1, got '0'" in done.stderr


def test_an_integer_setting_given_a_fraction_is_still_refused_as_not_an_integer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ImproperlyConfigured) as error:
        settings_read_with(monkeypatch, THREAD_LEASE_S="2.5")

    assert str(error.value) == "THREAD_LEASE_S must be an integer, got '2.5'"


def test_the_smtp_login_and_encryption_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    read = settings_read_with(
        monkeypatch, EMAIL_HOST_USER="gatehouse", EMAIL_HOST_PASSWORD="hunter2", EMAIL_USE_TLS="1"
    )

    assert (read["EMAIL_HOST_USER"], read["EMAIL_HOST_PASSWORD"]) == ("gatehouse", "hunter2")
    assert read["EMAIL_USE_TLS"] is True and read["EMAIL_USE_SSL"] is False
    assert settings_read_with(monkeypatch, EMAIL_USE_TLS=None, EMAIL_USE_SSL="1")["EMAIL_USE_SSL"] is True


def test_tls_and_ssl_together_for_smtp_are_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ImproperlyConfigured, match="EMAIL_USE_TLS and EMAIL_USE_SSL are exclusive"):
        settings_read_with(monkeypatch, EMAIL_USE_TLS="1", EMAIL_USE_SSL="1")
