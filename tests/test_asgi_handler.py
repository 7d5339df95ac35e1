"""The web server's Django handler (config.asgi_handler), driven through the ASGI application:
a request's middleware and view run in one hop to a thread, threads are lent to one request at
a time and reused, and a thread still busy with an abandoned request is not lent again."""

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from asgiref.sync import SyncToAsync

from config.asgi_handler import RequestExecutor, SyncChainASGIHandler

pytestmark = pytest.mark.django_db(transaction=True)  # the requests' threads use the database


def get(app: Any, paths: list[str]) -> list[int]:
    """GET each path at once through the ASGI application; their status codes."""

    async def run() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            responses = await asyncio.gather(*(client.get(path) for path in paths))
        return [response.status_code for response in responses]

    return asyncio.run(run())


@pytest.fixture
def handler() -> SyncChainASGIHandler:
    from config.asgi import django_asgi_app

    assert isinstance(django_asgi_app, SyncChainASGIHandler)
    return SyncChainASGIHandler()


def spy(handler: SyncChainASGIHandler, before: Callable[[], object]) -> list[int]:
    """Record the thread each request's get_response runs on, calling `before` first."""
    threads: list[int] = []
    get_response = SyncChainASGIHandler.get_response.__get__(handler)  # not an earlier spy

    def recorded(request: Any) -> Any:
        threads.append(threading.get_ident())
        before()
        return get_response(request)

    handler.get_response = recorded  # type: ignore[method-assign]
    return threads


def test_a_request_crosses_to_a_thread_three_times(
    handler: SyncChainASGIHandler, monkeypatch: pytest.MonkeyPatch
) -> None:
    """request_started, the whole middleware chain and view, response.close: Django's own handler
    makes seven crossings for the login page (each sync middleware hook and the view on its own)."""
    hops = 0
    call = SyncToAsync.__call__

    async def counted(self: SyncToAsync[Any, Any], *args: Any, **kwargs: Any) -> Any:
        nonlocal hops
        hops += 1
        return await call(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counted)

    assert get(handler, ["/login/"]) == [200]
    assert hops == 3


def test_requests_one_after_another_reuse_one_thread(handler: SyncChainASGIHandler) -> None:
    threads = spy(handler, before=lambda: None)

    for _ in range(5):
        assert get(handler, ["/login/"]) == [200]

    assert len(threads) == 5
    assert len(set(threads)) == 1


def test_requests_at_once_each_have_a_thread_of_their_own(handler: SyncChainASGIHandler) -> None:
    """Three requests each wait in their view for the other two: on a shared thread they never
    would (the barrier breaks)."""
    barrier = threading.Barrier(3, timeout=10)
    threads = spy(handler, before=barrier.wait)

    assert get(handler, ["/login/"] * 3) == [200, 200, 200]
    assert len(set(threads)) == 3

    # and the three threads are lent again afterwards, not started anew
    reused = spy(handler, before=lambda: None)
    assert get(handler, ["/login/"]) == [200]
    assert reused[0] in threads


def test_a_thread_still_running_a_call_is_not_idle() -> None:
    """A request cancelled because its client went away leaves its sync call running; the
    handler lends that thread again only once the call is done."""
    executor = RequestExecutor()
    release = threading.Event()
    try:
        assert executor.idle()
        running = executor.submit(release.wait, 10)
        assert not executor.idle()
        release.set()
        running.result(timeout=10)
        assert executor.idle()
    finally:
        release.set()
        executor.shutdown()


def test_a_client_that_goes_away_mid_view_ends_the_request_when_the_view_ends(
    handler: SyncChainASGIHandler,
) -> None:
    """The client disconnects while the view runs: no response is sent, and the request ends only
    once the view's sync call has (asgiref lets it finish), so its thread is idle and lent again."""
    release = threading.Event()
    threads = spy(handler, before=lambda: release.wait(10))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/login/",
        "raw_path": b"/login/",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost")],
        "server": ("localhost", 80),
        "client": ("127.0.0.1", 50000),
    }
    sent: list[dict[str, Any]] = []

    async def go_away() -> None:
        messages = iter([{"type": "http.request", "body": b"", "more_body": False}])

        async def receive() -> dict[str, Any]:
            message = next(messages, None)
            if message is not None:
                return message
            while not threads:  # disconnect once the view is running
                await asyncio.sleep(0.01)
            asyncio.get_running_loop().call_later(0.3, release.set)
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await handler(scope, receive, send)

    try:
        asyncio.run(go_away())
        assert release.is_set()  # the request ended after the view did
        assert sent == []  # no response: the client had gone
    finally:
        release.set()

    after = spy(handler, before=lambda: None)
    assert get(handler, ["/login/"]) == [200]
    assert after == threads  # the same thread, lent again
