"""Session fixtures for integration tests against real services.

    redis_ready      the Redis named by settings.REDIS_URL, flushed (embedded: started for the session)
    live_services    a tests.live.LiveServices: daphne on a free port, pointed at the test database
    live_server_url  live_services.url, e.g. "http://127.0.0.1:41234"
    celery_worker    the Popen of a real Celery worker ("test-1") sharing live_services' environment

Integration tests need @pytest.mark.django_db(transaction=True) so their writes are committed
and visible to the child processes.
"""

import copy
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from channels.layers import channel_layers
from django.conf import settings
from django.db import connection
from django.test.utils import override_settings

from config import embedded_redis
from tests.live import LiveServices, Workers, free_port, live_env, log_dir, other_workers_paused, tail


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
        services.start_web(port)
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
    yield worker
    live_services.stop(worker)


@pytest.fixture
def workers(live_services: LiveServices, settings: Any) -> Iterator[Workers]:
    """Workers a fault test starts itself, with every other worker's consumer paused meanwhile."""
    settings.RECONCILE_INTERVAL_S = 1  # the reconciler this process runs treats 1 s of quiet as lost
    with other_workers_paused():
        started = Workers(live_services)
        yield started
        started.stop_all()
