"""A long-lived thread's page stays light: it shows the newest page of the conversation with a way
to earlier ones, reads only the requests its messages need, and costs the same queries however
long the thread; a tag still pairs with the message carrying its call on every page. A deleted
thread's open pages stop calling its undecided calls pending."""

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import websockets
from django.db import connection
from django.db.models.signals import post_init
from django.test import Client
from django.test.utils import CaptureQueriesContext

from approvals.conversation import CONVERSATION_PAGE
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.selectors import SIDE_REQUESTS
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import CheckpointSource, ThreadStatus
from tests.factories import make_gate, make_user
from tests.test_live_push import session_cookie
from tests.test_live_thread_deleted import pushed_until_closed

pytestmark = pytest.mark.django_db


def refund_call(n: int, *, args: dict[str, Any] | None = None) -> dict[str, Any]:
    arguments = args if args is not None else {"order_id": f"ORD-{n}", "amount_cents": n}
    return {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": "issue_refund", "arguments": json.dumps(arguments)},
    }


def long_thread(*, turns: int, extra: list[dict[str, Any]] = ()) -> ApprovalRequest:  # type: ignore[assignment]
    """make_gate's thread (its input and the gated call: 2 messages), then `turns` turns of an
    assistant message calling issue_refund (call_<n>, "turn <n>") and the tool's result, then
    `extra` messages, all in one more checkpoint at the head. Returns the gate's request."""
    gate = make_gate()
    backend = get_backend()
    head = backend.get(thread_id=gate.thread_id)
    messages = list(head.values["messages"])
    for n in range(turns):
        messages.append({"role": "assistant", "content": f"turn {n}", "tool_calls": [refund_call(n)]})
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": f"refunded {n}"})
    messages.extend(extra)
    backend.put(
        thread_id=gate.thread_id,
        parent_id=head.id,
        expected_head=head.id,
        status=ThreadStatus.WAITING,
        checkpoint=NewCheckpoint(
            values={**head.values, "messages": messages}, source=CheckpointSource.STEP, node="model"
        ),
    )
    return gate


def add_requests(gate: ApprovalRequest, keys: dict[str, str], *, args: dict[str, Any] | None = None) -> None:
    """One request per key (oldest first) with the status given: the gate's, at the thread's head."""
    head = get_backend().get(thread_id=gate.thread_id).id
    rows = []
    for key, status in keys.items():
        row = ApprovalRequest.objects.get(pk=gate.pk)
        row.pk, row.key, row.checkpoint_id, row.status = None, key, head, status
        if args is not None:
            row.args = args
        rows.append(row)
    ApprovalRequest.objects.bulk_create(rows)


def client_for(username: str, *roles: str) -> Client:
    client = Client()
    client.force_login(make_user(username, *roles))
    return client


@pytest.fixture
def requests_loaded() -> Iterator[list[int]]:
    """The ApprovalRequest rows made from now on (their ids, one per row read or built)."""
    loaded: list[int] = []

    def count(sender: Any, instance: ApprovalRequest, **kwargs: Any) -> None:
        loaded.append(instance.pk)

    post_init.connect(count, sender=ApprovalRequest)
    yield loaded
    post_init.disconnect(count, sender=ApprovalRequest)


def shown_turns(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<div class="content">turn (\d+)</div>', html)]


def tag_of_turn(html: str, n: int) -> str:
    """The text of the decision tag on the message "turn n" ("" if it has none)."""
    message = re.search(rf"turn {n}</div>(.*?)</li>", html, re.S)
    assert message is not None, f"turn {n} is not on the page"
    tag = re.search(r'<span [^>]*class="tag decision-[a-z]+">(.*?)</span>', message.group(1), re.S)
    return " ".join(tag.group(1).split()) if tag else ""


def test_a_long_thread_page_shows_its_newest_messages_and_reads_only_the_requests_they_need(
    requests_loaded: list[int],
) -> None:
    gate = long_thread(turns=999)  # 2,000 messages
    add_requests(gate, {f"call_{n}": ApprovalStatus.APPROVED for n in range(0, 999, 3)})  # 333 more
    client = client_for("olga", "operator")
    requests_loaded.clear()

    html = client.get(f"/threads/{gate.thread_id}/").content.decode()

    assert html.count('<li class="msg ') == CONVERSATION_PAGE
    assert shown_turns(html) == list(range(949, 999))  # 50 turns: a call and its result each
    assert "Messages 1901 to 2000 of 2000" in html
    assert f'href="/threads/{gate.thread_id}/?messages_before=1900" rel="prev"' in html
    # The requests of the calls shown (17 of the 50) and the side's newest few, never all 334.
    assert len(requests_loaded) <= 17 + SIDE_REQUESTS
    assert html.count('href="/approvals/') == SIDE_REQUESTS
    assert f"The newest {SIDE_REQUESTS}; {334 - SIDE_REQUESTS} earlier ones are tagged" in html


def test_the_thread_page_costs_the_same_queries_for_2000_messages_and_300_requests_as_for_a_few() -> None:
    short = long_thread(turns=5)
    add_requests(short, {f"call_{n}": ApprovalStatus.APPROVED for n in range(3)})
    long = long_thread(turns=999)
    add_requests(long, {f"call_{n}": ApprovalStatus.APPROVED for n in range(0, 999, 3)})
    client = client_for("olga", "operator")
    client.get(f"/threads/{short.thread_id}/")  # caches warm (sessions, the agent registry)
    counted, pages = [], []
    for gate, query in [(short, {}), (long, {}), (long, {"messages_before": "1000"})]:
        with CaptureQueriesContext(connection) as queries:
            pages.append(client.get(f"/threads/{gate.thread_id}/", query).content.decode())
        counted.append(len(queries))

    assert counted[0] == counted[1] == counted[2]
    assert "Messages 901 to 1000 of 2000" in pages[2]


def test_following_the_earlier_links_shows_every_message_once_each_tag_on_its_own_call() -> None:
    # 2 + 300 messages and one more: the pages' edges fall between a call and its result.
    gate = long_thread(turns=150, extra=[{"role": "assistant", "content": "All done."}])
    statuses = [ApprovalStatus.APPROVED, ApprovalStatus.REJECTED, ApprovalStatus.EXPIRED]
    add_requests(gate, {f"call_{n}": statuses[n % 3] for n in range(150)})
    client = client_for("olga", "operator")

    url = pages_url = f"/threads/{gate.thread_id}/"
    pages = []
    while url:
        html = client.get(url).content.decode()
        pages.append(html)
        older = re.search(r'href="(/threads/[^"]+\?messages_before=\d+)" rel="prev"', html)
        url = older.group(1).replace("&amp;", "&") if older else ""

    assert len(pages) == 4  # 303 messages: 100, 100, 100 and the first 3
    turns = [n for html in reversed(pages) for n in shown_turns(html)]
    assert turns == list(range(150))
    for html in pages:
        for n in shown_turns(html):
            assert tag_of_turn(html, n) == statuses[n % 3]
    # A result whose call is on the page before still says which tool it is the result of.
    assert re.search(
        r'Messages 104 to 203 of 303.*?<li class="msg msg-tool">\s*<div class="role">result of issue_refund',
        pages[1],
        re.S,
    )
    assert "Newest messages" in pages[1] and "Newest messages" not in pages[0]
    assert "Please refund order ORD-1001" in pages[-1] and "Please refund order" not in pages[0]
    # An empty page parameter is the newest page, as an empty ?history_before= is.
    assert shown_turns(client.get(pages_url, {"messages_before": ""}).content.decode()) == shown_turns(
        pages[0]
    )


def test_requests_an_adapter_keyed_otherwise_pair_in_order_across_pages() -> None:
    # Two calls alike (a LangGraph interrupt names no call): the older request answers the earlier.
    same = {"order_id": "ORD-SAME", "amount_cents": 100}
    gate = long_thread(turns=0)
    backend = get_backend()
    head = backend.get(thread_id=gate.thread_id)
    messages = list(head.values["messages"])
    for n in range(120):
        call = refund_call(n, args=same if n in (10, 110) else None)
        messages += [{"role": "assistant", "content": f"turn {n}", "tool_calls": [call]}]
        messages += [{"role": "tool", "tool_call_id": f"call_{n}", "content": "done"}]
    backend.put(
        thread_id=gate.thread_id,
        parent_id=head.id,
        expected_head=head.id,
        status=ThreadStatus.WAITING,
        checkpoint=NewCheckpoint(values={**head.values, "messages": messages}, source=CheckpointSource.STEP),
    )
    add_requests(
        gate, {"interrupt-a:0": ApprovalStatus.APPROVED, "interrupt-b:0": ApprovalStatus.REJECTED}, args=same
    )
    client = client_for("olga", "operator")

    newest = client.get(f"/threads/{gate.thread_id}/").content.decode()
    earlier = client.get(f"/threads/{gate.thread_id}/", {"messages_before": "102"}).content.decode()

    assert 110 in shown_turns(newest) and 10 not in shown_turns(newest)
    assert tag_of_turn(newest, 110) == "rejected"
    assert tag_of_turn(earlier, 10) == "approved"


@pytest.mark.parametrize("before", ["0", "-1", "abc", "2.5", "²", "303", "9" * 40, " 5"])
def test_a_page_of_messages_the_conversation_does_not_have_is_not_found(before: str) -> None:
    gate = long_thread(turns=100)
    client = client_for("olga", "operator")

    response = client.get(f"/threads/{gate.thread_id}/", {"messages_before": before})

    assert response.status_code == 404


@pytest.mark.django_db(transaction=True)
def test_the_thread_socket_of_an_earlier_page_renders_that_page(live_server_url: str) -> None:
    gate = long_thread(turns=150)
    cookie = session_cookie("olga", "operator")
    path = f"/ws/threads/{gate.thread_id}/?view=thread&messages_before=52"

    async def first_push() -> str:
        ws_url = live_server_url.replace("http://", "ws://") + path
        headers = {"Cookie": f"sessionid={cookie}"}
        async with websockets.connect(ws_url, additional_headers=headers, origin=live_server_url) as ws:  # type: ignore[arg-type]
            return str(await asyncio.wait_for(ws.recv(), 5))  # the catch-up render on connect

    html = asyncio.run(first_push())

    assert shown_turns(html) == list(range(25))
    assert "Messages 1 to 52 of 302" in html and "Newest messages" in html


@pytest.mark.django_db(transaction=True)
def test_a_deleted_threads_open_pages_say_its_undecided_calls_will_never_be_decided(
    live_server_url: str,
) -> None:
    gate = make_gate()
    cookie = session_cookie("olga", "operator")
    path = f"/ws/threads/{gate.thread_id}/?view=thread"

    received, _ = pushed_until_closed(live_server_url, cookie, path, gate.thread_id)

    [notice] = [m for m in received if "data-thread-deleted" in m]
    assert (
        '<span class="tag decision-expired" hx-swap-oob="outerHTML:[data-undecided]" data-never-decided>'
        "never decided: thread deleted</span>"
    ) in notice


def test_a_pending_calls_tag_is_marked_for_the_deletion_notice_and_a_decided_ones_is_not() -> None:
    gate = long_thread(turns=2)
    add_requests(gate, {"call_0": ApprovalStatus.APPROVED})
    client = client_for("olga", "operator")

    html = client.get(f"/threads/{gate.thread_id}/").content.decode()

    assert html.count("data-undecided") == 1
    assert '<span data-undecided class="tag decision-pending">pending' in html


def test_the_history_pager_keeps_the_conversation_page_the_reader_is_on() -> None:
    gate = long_thread(turns=150)
    backend = get_backend()
    for _ in range(101):  # more checkpoints than a page of the history
        head = backend.get(thread_id=gate.thread_id)
        backend.put(
            thread_id=gate.thread_id,
            parent_id=head.id,
            expected_head=head.id,
            status=ThreadStatus.WAITING,
            checkpoint=NewCheckpoint(values=head.values, source=CheckpointSource.STEP, node="model"),
        )
    client = client_for("olga", "operator")
    url = f"/threads/{gate.thread_id}/"

    html = client.get(url, {"messages_before": "102"}).content.decode()
    older = re.search(r'href="\?history_before=([^"&]+)&amp;messages_before=102" rel="next"', html)
    assert older, "the way to older checkpoints drops the conversation's page"
    html = client.get(url, {"messages_before": "102", "history_before": older.group(1)}).content.decode()
    assert '<a href="?messages_before=102">Newest checkpoints ↓</a>' in html
    assert shown_turns(html) == list(range(0, 50))
