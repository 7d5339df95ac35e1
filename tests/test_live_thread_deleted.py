"""Deleting a thread tells its open pages, over a real WebSocket to uvicorn through the Redis
channel layer: the decision page and the thread page show who deleted it in place of their
panel and buttons (an out-of-band swap), and the socket closes normally (no reconnect)."""

import asyncio

import pytest
import websockets
from asgiref.sync import sync_to_async
from django.db import connection

from approvals.actions.threads import do_delete_thread
from tests.factories import make_gate, make_user
from tests.test_live_push import session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


def delete_in_thread(thread_id: str) -> None:
    try:
        do_delete_thread(thread_id, user=make_user("ada", "admin"))
    finally:
        connection.close()  # the worker thread's own connection, so teardown can drop the DB


def pushed_until_closed(url: str, cookie: str, path: str, thread_id: str) -> tuple[list[str], int | None]:
    """What the socket at `path` receives after its catch-up, once the thread is deleted, and
    the code it closes with."""

    async def scenario() -> tuple[list[str], int | None]:
        ws_url = url.replace("http://", "ws://") + path
        async with websockets.connect(
            ws_url,
            additional_headers={"Cookie": f"sessionid={cookie}"},
            origin=url,  # type: ignore[arg-type]
        ) as ws:
            await asyncio.wait_for(ws.recv(), 5)  # the catch-up render on connect
            await sync_to_async(delete_in_thread)(thread_id)
            received: list[str] = []
            try:
                while True:
                    received.append(str(await asyncio.wait_for(ws.recv(), 10)))
            except websockets.ConnectionClosed as exc:
                return received, exc.rcvd.code if exc.rcvd else None

    return asyncio.run(scenario())


def test_an_open_decision_page_shows_who_deleted_its_thread_in_place_of_the_buttons(
    live_server_url: str,
) -> None:
    gate = make_gate()
    cookie = session_cookie("rita", "reviewer")
    path = f"/ws/threads/{gate.thread_id}/?request={gate.pk}"

    received, code = pushed_until_closed(live_server_url, cookie, path, gate.thread_id)

    [notice] = [m for m in received if "data-thread-deleted" in m]
    assert f'id="decision-panel-{gate.pk}"' in notice and 'hx-swap-oob="true"' in notice
    assert "This thread was deleted by ada." in notice
    assert "Approve" not in notice and "<form" not in notice
    assert code == 1000


def test_an_open_thread_page_shows_who_deleted_it_in_place_of_the_operators_buttons(
    live_server_url: str,
) -> None:
    gate = make_gate()
    cookie = session_cookie("olga", "operator")
    path = f"/ws/threads/{gate.thread_id}/?view=thread"

    received, code = pushed_until_closed(live_server_url, cookie, path, gate.thread_id)

    [notice] = [m for m in received if "data-thread-deleted" in m]
    assert 'id="thread-side"' in notice and 'hx-swap-oob="true"' in notice
    # And at the top of the main column: on a phone the side sits below the whole conversation.
    assert '<div id="thread-deleted-top" class="alert warn" role="status" hx-swap-oob="true"' in notice
    assert "This thread was deleted by ada." in notice and "<button" not in notice
    assert code == 1000
