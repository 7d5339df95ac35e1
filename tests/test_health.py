import http.client
import json
import subprocess
import time

import pytest
from django.test import Client
from pytest_django.fixtures import Settings

from tests.live import free_port, http_get


@pytest.mark.django_db(transaction=True)
def test_healthz_reports_database_redis_and_workers(
    live_server_url: str, celery_worker: subprocess.Popen[bytes]
) -> None:
    status, body = http_get(f"{live_server_url}/healthz")
    health = json.loads(body)

    assert status == 200, health
    assert health["ok"] is True
    assert health["database"]["ok"] is True
    assert health["database"]["vendor"] in {"postgresql", "sqlite"}
    assert health["redis"]["ok"] is True
    assert health["celery"]["workers"] >= 1


@pytest.mark.django_db
def test_healthz_is_503_quickly_when_redis_is_down(client: Client, settings: Settings) -> None:
    settings.REDIS_URL = f"redis://:secret@127.0.0.1:{free_port()}/0"  # nothing listens there

    started = time.monotonic()
    response = client.get("/healthz")
    elapsed = time.monotonic() - started

    health = response.json()
    assert response.status_code == 503
    assert health["ok"] is False
    assert health["database"]["ok"] is True
    assert health["redis"]["ok"] is False
    assert "error" in health["redis"]
    assert "secret" not in health["redis"]["url"]
    assert health["celery"] == {"ok": False, "workers": 0}
    assert elapsed < 2.5


@pytest.mark.django_db(transaction=True)
def test_the_web_server_names_no_software_and_keeps_an_idle_connection_past_uvicorns_default(
    live_server_url: str,
) -> None:
    # A worker's model client reuses its connections: closed after uvicorn's default 5 idle
    # seconds, a request sent as the server closes fails. `serve` keeps them 75 s.
    host, port = live_server_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("GET", "/healthz")
    first = connection.getresponse()
    first.read()
    time.sleep(6)
    connection.request("GET", "/healthz")  # on the same socket
    again = connection.getresponse()
    again.read()  # uvicorn's default would have closed it: RemoteDisconnected
    connection.close()

    assert first.getheader("Server") is None and again.getheader("Server") is None
    assert again.status in (200, 503)  # 503 without a worker; answered either way


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "redis://:hunter2@127.0.0.1:{port}/0",
        "redis://ops:hunter2@127.0.0.1:{port}/0",
        "redis://127.0.0.1:{port}/0?password=hunter2",
        "redis://127.0.0.1:{port}/0?db=1&Password=hunter2&socket_timeout=1",
        "unix:///tmp/no-such-redis.sock?password=hunter2",
    ],
)
def test_healthz_never_shows_the_redis_password(client: Client, settings: Settings, url: str) -> None:
    settings.REDIS_URL = url.format(port=free_port())  # nothing listens there: the error is shown too

    body = client.get("/healthz").content.decode()

    assert "hunter2" not in body
    assert "***" in body
