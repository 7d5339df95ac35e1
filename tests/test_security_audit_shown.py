"""The inbox socket reads what a page sends ({"shown": [ids]}) as text from outside: a message
nested deeper than Python's parser recurses (a few thousand brackets, under the size bound) is
ignored like any other unreadable message, not an exception that closes the socket with a
traceback. Real uvicorn, real Redis channel layer."""

import asyncio
import json

import pytest

from approvals.tests.test_two_person import decide
from tests.factories import make_gate, make_user
from tests.test_inbox_live import connect, cookie_for, until
from tests.test_push_inbox_shown import answers

pytestmark = pytest.mark.django_db(transaction=True)

DEEP = [
    '{"shown": ' + "[" * 2000 + "]" * 2000 + "}",  # 4,011 characters: under the size bound
    "[" * 4000,
]


@pytest.mark.parametrize("text", DEEP, ids=["nested", "unclosed"])
def test_a_deeply_nested_message_is_ignored_and_the_socket_stays_open(
    live_server_url: str, text: str
) -> None:
    cookie = cookie_for("rita", "reviewer")
    gone = make_gate()
    decide(gone, make_user("sam", "reviewer"), decision="reject", message="not now")

    async def scenario() -> tuple[list[str], list[str]]:
        async with await connect(live_server_url, cookie) as ws:
            await until(ws, lambda m: 'id="inbox-list"' in m, timeout=5)
            ignored = await answers(ws, text)
            # Still open, and still answering the page's real list.
            return ignored, await answers(ws, json.dumps({"shown": [gone.pk]}))

    ignored, said = asyncio.run(scenario())
    assert ignored == []
    assert len(said) == 1 and f"Request {gone.pk} was rejected by sam" in said[0]
