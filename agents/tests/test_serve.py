"""What `serve` (`make run`) starts: one step worker per core, each named and pooled apart."""

import os

import pytest
from django.core.management import CommandError, call_command

from agents.management.commands.serve import child_commands, child_env, is_postgres, parts
from tests.factories import settings_read_with


def test_serve_starts_step_workers_processes_each_with_a_node_name_of_its_own(settings) -> None:
    settings.STEP_WORKERS = 3

    commands = child_commands(8000)

    workers = [name for name in commands if name.startswith("worker")]
    assert workers == ["worker1", "worker2", "worker3"]
    # Two processes under one node name would share Celery's control replies and the lease's owner.
    assert [commands[n][commands[n].index("-n") + 1] for n in workers] == [
        "worker1@%h",
        "worker2@%h",
        "worker3@%h",
    ]
    assert all(commands[n].count("--concurrency") == 1 for n in workers)


@pytest.mark.skipif(not is_postgres(), reason="thread-pool workers pool Postgres connections")
def test_each_step_worker_gets_a_pool_of_step_db_pool_size_connections(settings) -> None:
    settings.STEP_POOL = "threads"
    settings.STEP_DB_POOL_SIZE = 5

    assert child_env("worker") == {"DB_POOL_MAX_SIZE": "5"}


@pytest.mark.skipif(not is_postgres(), reason="thread-pool workers pool Postgres connections")
def test_every_worker_and_the_web_server_serve_starts_has_a_bounded_pool(settings) -> None:
    # The README's connection budget counts each of them; a process left out would keep a
    # connection per thread for CONN_MAX_AGE.
    settings.STEP_POOL = "threads"
    settings.NOTIFY_DB_POOL_SIZE = 3

    pools = {name: child_env(name.rstrip("0123456789")) for name in child_commands(8000) if name != "beat"}

    assert all("DB_POOL_MAX_SIZE" in env for env in pools.values()), pools
    assert pools["notify"] == {"DB_POOL_MAX_SIZE": "3"}


@pytest.mark.skipif(not is_postgres(), reason="SQLite keeps prefork workers of 2 processes")
@pytest.mark.skipif("STEP_CONCURRENCY" in os.environ, reason="set in the environment")
def test_each_step_worker_holds_the_readmes_default_of_500_steps_in_flight() -> None:
    # With two processes, 1,000 threads started at once are all in flight (README, "Performance").
    command = child_commands(8000)["worker1"]
    assert command[command.index("--pool") + 1] == "threads"
    assert command[command.index("--concurrency") + 1] == "500"


def test_the_web_server_listens_on_loopback_unless_web_host_says_otherwise(settings) -> None:
    web = child_commands(8000)["web"]
    assert web[web.index("--host") + 1] == "127.0.0.1"

    settings.WEB_HOST = "0.0.0.0"  # a reverse proxy, or another host, reaches it
    web = child_commands(8000)["web"]
    assert web[web.index("--host") + 1] == "0.0.0.0"


def test_serve_only_workers_starts_the_workers_and_neither_the_web_server_nor_beat(settings) -> None:
    settings.STEP_WORKERS = 2

    assert list(child_commands(8000, only=("workers",))) == ["worker1", "worker2", "resume", "notify"]
    assert list(child_commands(8000, only=("web", "beat"))) == ["web", "beat"]
    assert list(child_commands(8000)) == ["web", "worker1", "worker2", "resume", "notify", "beat"]


def test_serve_only_takes_parts_comma_separated() -> None:
    assert parts("web, beat,") == ("web", "beat")


@pytest.mark.parametrize("value", ["worker", "", ",", "web,redis"])
def test_serve_only_refuses_a_part_it_does_not_have(value: str) -> None:
    with pytest.raises(CommandError, match="choose from web, workers, beat"):
        call_command("serve", "--only", value)


WORKER_SETTINGS = {name: None for name in ("STEP_POOL", "STEP_CONCURRENCY", "STEP_WORKERS")}


def test_on_postgres_serve_starts_a_thread_pool_step_worker_per_core_at_most_8(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    read = settings_read_with(
        monkeypatch, **WORKER_SETTINGS, DATABASE_URL="postgres://gatehouse@db:5432/gatehouse"
    )
    assert (read["STEP_POOL"], read["STEP_CONCURRENCY"], read["STEP_WORKERS"]) == ("threads", 500, 8)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert (
        settings_read_with(monkeypatch, DATABASE_URL="postgres://gatehouse@db:5432/gatehouse")["STEP_WORKERS"]
        == 2
    )


def test_on_sqlite_serve_keeps_one_prefork_worker_of_two_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    read = settings_read_with(monkeypatch, **WORKER_SETTINGS, DATABASE_URL=None)
    assert (read["STEP_POOL"], read["STEP_CONCURRENCY"], read["STEP_WORKERS"]) == ("prefork", 2, 1)
