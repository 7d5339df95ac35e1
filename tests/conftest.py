"""Session fixtures for integration tests against real services.

    redis_ready      the Redis named by settings.REDIS_URL, flushed (embedded: started for the session)
    live_services    a tests.live.LiveServices: uvicorn on a free port, pointed at the test database
    live_server_url  live_services.url, e.g. "http://127.0.0.1:41234"
    celery_worker    the Popen of a real Celery worker ("test-1") sharing live_services' environment,
                     with a notify worker ("test-notify") beside it, as `serve` runs them
    in_memory_layer  Channels' in-memory layer for the test, for sockets driven in this process
    steps_sent       the (thread id, checkpoint id) of each step task sent from now on, in place
                     of sending it to the broker

Integration tests need @pytest.mark.django_db(transaction=True) so their writes are committed
and visible to the child processes.
"""

import copy
import subprocess
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
import redis
from channels.layers import channel_layers
from django.conf import settings
from django.db import OperationalError, connection
from django.db.backends.base.operations import BaseDatabaseOperations
from django.test.utils import override_settings

from agents import dispatch
from agents.management.commands.serve import child_env
from config import embedded_redis
from tests.live import LiveServices, Workers, free_port, live_env, log_dir, other_workers_paused, tail


@pytest.fixture(scope="session", autouse=True)
def flush_outlasts_live_readers() -> Iterator[None]:
    """A transactional test's teardown truncates every table while the web server or a worker may still be
    reading (a push rendered after the test closed its socket). Postgres may then abort the TRUNCATE
    as a deadlock (or a fault test may have killed the connection); retry it, or the next test
    starts with this one's rows."""
    original = BaseDatabaseOperations.execute_sql_flush

    def execute_sql_flush(self: BaseDatabaseOperations, sql_list: Iterable[str]) -> None:
        for attempt in range(5):
            try:
                return original(self, sql_list)
            except OperationalError:
                if attempt == 4:
                    raise
                if not self.connection.is_usable():
                    self.connection.close()  # the next attempt reconnects
                time.sleep(0.2 * (attempt + 1))

    BaseDatabaseOperations.execute_sql_flush = execute_sql_flush  # type: ignore[method-assign]
    yield
    BaseDatabaseOperations.execute_sql_flush = original  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's test databases, and before they are dropped, an end to the sessions this
    process's other threads still hold on them (a LangGraph saver's thread keeps its connection
    up to CONN_MAX_AGE, as a request's thread does), or Postgres refuses to drop one."""
    yield
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture(scope="session")
def redis_ready() -> Iterator[str]:
    server = None
    port = settings.EMBEDDED_REDIS_PORT
    if settings.REDIS_EMBEDDED and not embedded_redis.ping(port):
        log = log_dir() / "redis.log"
        with log.open("wb") as output:
            try:
                server = embedded_redis.start(port, output=output)
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}\n{tail(log)}") from None
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)
    if not settings.REDIS_EMBEDDED and client.get_connection_kwargs().get("db", 0) == 0:
        pytest.fail("REDIS_URL points at db 0 of a shared Redis; tests flush it, so use e.g. /15")
    client.flushdb()
    client.close()
    yield settings.REDIS_URL
    if server is not None:
        embedded_redis.stop(server)


@pytest.fixture(scope="session")
def live_services(redis_ready: str, django_db_setup: None, django_db_blocker: Any) -> Iterator[LiveServices]:
    with django_db_blocker.unblock():
        connection.ensure_connection()  # fail here, clearly, if the test database is unreachable
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    prefix = f"gatehouse-test-{uuid.uuid4().hex[:8]}"  # isolates this run's channel groups
    services = LiveServices(url=url, env=live_env(port, prefix))

    # This process talks to the same offline model and channel layer as the children.
    layers: dict[str, Any] = copy.deepcopy(settings.CHANNEL_LAYERS)
    layers["default"]["CONFIG"]["prefix"] = prefix
    override = override_settings(OPENAI_BASE_URL=f"{url}/offline/v1", CHANNEL_LAYERS=layers)
    override.enable()
    channel_layers.backends = {}  # channels caches layers built from the old settings
    try:
        services.start_web(port, extra_env=child_env("web"))  # pooled, as `serve` starts it
        yield services
    finally:
        services.stop_all()
        override.disable()
        channel_layers.backends = {}


@pytest.fixture(scope="session")
def live_server_url(live_services: LiveServices) -> str:
    return live_services.url


@pytest.fixture(scope="session")
def celery_worker(live_services: LiveServices) -> Iterator[subprocess.Popen[bytes]]:
    worker = live_services.start_worker("test-1")
    notify = live_services.start_notify_worker("test-notify") if settings.NOTIFY_QUEUE else None
    yield worker
    if notify is not None:
        live_services.stop(notify)
    live_services.stop(worker)


@pytest.fixture
def workers(live_services: LiveServices, settings: Any) -> Iterator[Workers]:
    """Workers a fault test starts itself, with every other worker's consumer paused meanwhile."""
    # The reconciler this process runs re-sends a step handed to the broker (and not started)
    # after 3 s, so tests of lost tasks do not wait the default two minutes.
    settings.RECONCILE_QUEUED_AFTER_S = 3
    with other_workers_paused():
        started = Workers(live_services)
        yield started
        started.stop_all()


@pytest.fixture
def steps_sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    sent: list[tuple[str, str]] = []
    monkeypatch.setattr(
        dispatch,
        "enqueue_step",
        lambda *, thread_id, checkpoint_id, **_: sent.append((thread_id, checkpoint_id)),
    )
    return sent


@pytest.fixture
def in_memory_layer(settings: Any) -> Iterator[None]:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends = {}
    yield
    channel_layers.backends = {}
