"""Live pushes over a real WebSocket to uvicorn, through the Redis channel layer."""

import asyncio
from typing import Any

import pytest
import websockets
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import Client

from agents.actions import check_start_thread, do_start_thread
from approvals.models import ApprovalRequest
from tests.factories import make_user
from tests.live import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def session_cookie(username: str, *roles: str) -> str:
    make_user(username, *roles)
    client = Client()
    assert client.login(username=username, password="pw-for-tests-only")
    return client.cookies["sessionid"].value


def start_refund(order: str) -> str:
    agent = check_start_thread(agent="refunds", text=f"Please refund order {order}", thread_id=None)
    return do_start_thread(agent=agent, text=f"Please refund order {order}", thread_id=None, actor="test")[
        0
    ].id


def start_refund_in_thread(order: str) -> str:
    """start_refund from a worker thread, closing that thread's connection so teardown can drop the DB."""
    try:
        return start_refund(order)
    finally:
        connection.close()


async def connect(url: str, cookie: str | None, origin: str | None = None) -> Any:
    ws_url = url.replace("http://", "ws://") + "/ws/inbox/"
    headers = {"Cookie": f"sessionid={cookie}"} if cookie else {}
    return await websockets.connect(ws_url, additional_headers=headers, origin=origin or url)  # type: ignore[arg-type]


def test_an_idle_inbox_socket_stays_open_and_still_receives(live_server_url: str, celery_worker: Any) -> None:
    cookie = session_cookie("rita", "reviewer")

    async def scenario() -> str:
        async with await connect(live_server_url, cookie) as ws:
            await asyncio.wait_for(ws.recv(), 5)  # the catch-up list sent on connect
            await asyncio.sleep(12)  # longer than channels-redis's 5 s blocking pop
            thread_id = await sync_to_async(start_refund_in_thread)("ORD-1001")
            while True:
                message = str(await asyncio.wait_for(ws.recv(), 20))
                if "issue_refund" in message:
                    return thread_id + message

    received = asyncio.run(scenario())
    request_ = ApprovalRequest.objects.get()
    assert f'id="approval-{request_.pk}"' in received


def test_the_inbox_socket_catches_up_from_the_database_on_connect(
    live_server_url: str, celery_worker: Any
) -> None:
    start_refund("ORD-1002")
    wait_for(ApprovalRequest.objects.exists, timeout=20, message="a pending approval")
    cookie = session_cookie("rita", "reviewer")

    async def first_message() -> str:
        async with await connect(live_server_url, cookie) as ws:
            return str(await asyncio.wait_for(ws.recv(), 5))

    message = asyncio.run(first_message())
    assert 'id="inbox-list"' in message and "ORD-1002" in message


def test_the_inbox_socket_refuses_anonymous_users_and_foreign_origins(live_server_url: str) -> None:
    cookie = session_cookie("rita", "reviewer")

    async def closed_code(cookie: str | None, origin: str | None) -> int | None:
        try:
            async with await connect(live_server_url, cookie, origin) as ws:
                await asyncio.wait_for(ws.recv(), 5)
        except websockets.ConnectionClosed as exc:
            return exc.rcvd.code if exc.rcvd else None
        except websockets.InvalidStatus as exc:
            return exc.response.status_code
        return None

    port = live_server_url.rsplit(":", 1)[1]
    other_port = str(int(port) + 1)

    assert asyncio.run(closed_code(None, None)) in (4401, 403)
    assert asyncio.run(closed_code(cookie, "http://evil.example")) == 403
    assert asyncio.run(closed_code(cookie, f"http://127.0.0.1:{other_port}")) == 403  # same host, other port
    assert asyncio.run(closed_code(cookie, "http://127.0.0.1")) == 403  # no port: another origin
    assert asyncio.run(closed_code(cookie, live_server_url)) is None  # the host and port: admitted


def test_the_socket_origin_must_be_the_host_and_port_it_connects_to() -> None:
    from config.websocket_origin import same_origin

    def scope(origin: str, host: str) -> dict[str, Any]:
        return {"headers": [(b"origin", origin.encode()), (b"host", host.encode())]}

    assert same_origin(scope("http://localhost:8000", "localhost:8000"))
    assert same_origin(scope("https://127.0.0.1", "127.0.0.1"))
    assert not same_origin(scope("http://localhost:9999", "localhost:8000"))
    assert not same_origin(scope("http://localhost", "localhost:8000"))
    assert not same_origin(scope("http://evil.example:8000", "evil.example:8000"))  # not in ALLOWED_HOSTS
    assert not same_origin(scope("null", "localhost:8000"))
    assert not same_origin({"headers": [(b"host", b"localhost:8000")]})
