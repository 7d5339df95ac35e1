"""A (re)connecting inbox names the rows it showed ({"shown": [ids]}), and its socket answers
why those it no longer lists left: only of requests in queues the reviewer may see, nothing for
what is not such a list, and the socket stays open. Real uvicorn, real Redis channel layer."""

import asyncio
import contextlib
import json
from typing import Any

import pytest

from approvals.tests.test_two_person import decide
from tests.factories import make_gate, make_user
from tests.test_inbox_live import EMAIL, connect, cookie_for, in_thread, until

pytestmark = pytest.mark.django_db(transaction=True)


async def answers(ws: Any, text: str, *, quiet_s: float = 0.7) -> list[str]:
    """What the socket sends back to `text` (until it is quiet)."""
    await ws.send(text)
    seen = []
    with contextlib.suppress(TimeoutError):
        while True:
            seen.append(str(await asyncio.wait_for(ws.recv(), quiet_s)))
    return seen


def test_a_reconnecting_inbox_is_told_why_the_rows_it_showed_left(live_server_url: str) -> None:
    cookie = cookie_for("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    gone, stays = make_gate(), make_gate()
    decide(gone, sam, decision="reject", message="not now")

    async def scenario() -> list[str]:
        async with await connect(live_server_url, cookie) as ws:
            await until(ws, lambda m: 'id="inbox-list"' in m, timeout=5)
            return await answers(ws, json.dumps({"shown": [gone.pk, stays.pk]}))

    said = asyncio.run(scenario())
    assert said == [
        '<div hx-swap-oob="beforeend:#announce-queue">'
        f'<span data-left="{gone.pk}">Request {gone.pk} was rejected by sam and left your list</span></div>'
    ]


def test_an_inbox_naming_requests_in_queues_it_cannot_see_learns_nothing(live_server_url: str) -> None:
    rita = make_user("rita", "reviewer", queues=("refunds",))
    cookie = cookie_for("sam", "reviewer", queues=("outreach",))
    refund = make_gate()  # a queue sam may not see
    decide(refund, rita, decision="reject", message="not now")
    email = make_gate(agent="outreach", action="send_email", args=EMAIL)

    async def scenario() -> list[str]:
        async with await connect(live_server_url, cookie) as ws:
            await until(ws, lambda m: 'id="inbox-list"' in m, timeout=5)
            return await answers(ws, json.dumps({"shown": [refund.pk, email.pk, 10**6]}))

    assert asyncio.run(scenario()) == []


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[1, 2]",
        '{"shown": "12"}',
        '{"shown": [true, -1, 1.5, "7", 99999999999999999999999]}',
        json.dumps({"shown": list(range(1, 5000))}),  # longer than any page's list
    ],
    ids=["text", "list", "string", "not-ids", "too-long"],
)
def test_anything_but_a_list_of_request_ids_is_ignored_and_the_socket_stays_open(
    live_server_url: str, text: str
) -> None:
    cookie = cookie_for("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    gone = make_gate()
    decide(gone, sam, decision="approve")

    async def scenario() -> tuple[list[str], str]:
        async with await connect(live_server_url, cookie) as ws:
            await until(ws, lambda m: 'id="inbox-list"' in m, timeout=5)
            ignored = await answers(ws, text.replace("1, 2", f"{gone.pk}, 2"))
            arrived = await in_thread(make_gate)()
            pushed = await until(ws, lambda m: f'id="approval-{arrived.pk}"' in m, timeout=5)
            return ignored, pushed

    ignored, pushed = asyncio.run(scenario())
    assert ignored == []
    assert pushed  # still live
