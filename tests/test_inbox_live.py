"""Live inbox pushes over real WebSockets to uvicorn: each reviewer sees their own view, at once.

New items, claims, decisions by others and escalations reach every open inbox that may see them
within a second; a restricted queue's items never reach anyone outside it; filters hold.
"""

import asyncio
import re
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import websockets
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import Client
from django.utils import timezone

from agents.tools import Expiry
from approvals.actions.claims import do_claim
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.expiry import do_expire_due
from approvals.models import ApprovalRequest
from approvals.tests.helpers import gate_with_expiry
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db(transaction=True)

EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello"}


def cookie_for(username: str, *roles: str, queues: tuple[str, ...] = ()) -> str:
    make_user(username, *roles, queues=queues)
    client = Client()
    assert client.login(username=username, password="pw-for-tests-only")
    return client.cookies["sessionid"].value


def in_thread(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Product code run from the event loop: in a worker thread, closing its DB connection after."""

    def run() -> Any:
        try:
            return fn()
        finally:
            connection.close()

    return sync_to_async(run, thread_sensitive=False)


async def connect(url: str, cookie: str, query: str = "") -> Any:
    ws_url = url.replace("http://", "ws://") + "/ws/inbox/" + (f"?{query}" if query else "")
    return await websockets.connect(ws_url, additional_headers={"Cookie": f"sessionid={cookie}"}, origin=url)  # type: ignore[arg-type]


async def until(ws: Any, predicate: Callable[[str], bool], timeout: float = 1.0) -> str:
    """The first message matching predicate within timeout seconds (the catch-up list included)."""
    deadline = time.monotonic() + timeout
    while True:
        message = str(await asyncio.wait_for(ws.recv(), max(deadline - time.monotonic(), 0.01)))
        if predicate(message):
            return message


def row(request_: ApprovalRequest) -> str:
    return f'id="approval-{request_.pk}"'


def removes(request_: ApprovalRequest) -> Callable[[str], bool]:
    """A push that takes the request's row off the page (an out-of-band delete, or a list without it)."""
    return lambda m: (
        f'"delete:#approval-{request_.pk}"' in m or ('id="inbox-list"' in m and row(request_) not in m)
    )


def test_a_claim_and_a_decision_by_others_reach_an_open_inbox_within_a_second(live_server_url: str) -> None:
    cookie = cookie_for("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    request_ = make_gate()

    async def scenario() -> None:
        async with await connect(live_server_url, cookie) as ws:
            await until(ws, lambda m: row(request_) in m)
            await in_thread(lambda: do_claim(request_.pk, user=sam))()
            claimed = await until(ws, lambda m: "claimed by sam" in m)
            assert 'id="inbox-queues"' in claimed and "1 claimed" in claimed
            await in_thread(
                lambda: do_decide(
                    request_, reviewer=sam, valid=check_decision(request_, user=sam, decision="approve")
                )
            )()
            gone = await until(ws, removes(request_))
            assert re.search(r'<span id="inbox-count"[^>]*>0</span>', gone)

    asyncio.run(scenario())


def seen_leaving_an_open_inbox(
    live_server_url: str, request_: ApprovalRequest, act: Callable[[], Any]
) -> None:
    """A reviewer's open inbox shows the request; `act` (another person's) takes it off the page."""
    cookie = cookie_for("rita", "reviewer")

    async def scenario() -> None:
        async with await connect(live_server_url, cookie) as ws:
            await until(ws, lambda m: row(request_) in m)
            await in_thread(act)()
            await until(ws, removes(request_))

    asyncio.run(scenario())


def test_an_operators_cancel_removes_the_request_from_open_inboxes_within_a_second(
    live_server_url: str,
) -> None:
    from approvals.actions.threads import do_control

    olga = make_user("olga", "operator")
    request_ = make_gate()

    seen_leaving_an_open_inbox(
        live_server_url, request_, lambda: do_control(request_.thread_id, user=olga, verb="cancel")
    )

    request_.refresh_from_db()
    assert (request_.status, request_.status_reason) == ("superseded", "the thread was cancelled by olga")


def test_an_admins_thread_deletion_removes_its_requests_from_open_inboxes(live_server_url: str) -> None:
    from approvals.actions.threads import do_delete_thread

    ada = make_user("ada", "admin")
    request_ = make_gate()

    seen_leaving_an_open_inbox(
        live_server_url, request_, lambda: do_delete_thread(request_.thread_id, user=ada)
    )


def test_a_restricted_queue_never_reaches_reviewers_outside_it(live_server_url: str) -> None:
    make_user("rita", "reviewer", queues=("refunds",))
    sam_cookie = cookie_for("sam", "reviewer", queues=("outreach",))

    async def scenario() -> str:
        seen = []
        async with await connect(live_server_url, sam_cookie) as ws:
            await until(ws, lambda m: 'id="inbox-list"' in m)
            refund = await in_thread(make_gate)()
            email = await in_thread(lambda: make_gate(agent="outreach", action="send_email", args=EMAIL))()
            seen.append(await until(ws, lambda m: row(email) in m))
            assert all(row(refund) not in m for m in seen)
            return seen[-1]

    last = asyncio.run(scenario())
    assert "issue_refund" not in last and 'data-queue="refunds"' not in last


def test_a_filtered_inbox_stays_filtered_when_items_arrive(live_server_url: str) -> None:
    cookie = cookie_for("rita", "reviewer")

    async def scenario() -> str:
        async with await connect(live_server_url, cookie, "queue=outreach") as ws:
            await until(ws, lambda m: 'id="inbox-list"' in m)
            await in_thread(make_gate)()
            email = await in_thread(lambda: make_gate(agent="outreach", action="send_email", args=EMAIL))()
            return await until(ws, lambda m: row(email) in m)

    message = asyncio.run(scenario())
    assert "issue_refund" not in message
    assert 'data-queue="refunds"' in message  # the counts still cover every queue


def test_an_escalated_request_appears_in_the_target_queues_inbox(
    live_server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_user("rita", "reviewer", queues=("refunds",))
    cookie = cookie_for("sam", "reviewer", queues=("supervisors",))
    request_ = gate_with_expiry(monkeypatch, Expiry(60, "escalate", to_queue="supervisors"))

    async def scenario() -> str:
        async with await connect(live_server_url, cookie) as ws:
            first = await until(ws, lambda m: 'id="inbox-list"' in m)
            assert row(request_) not in first
            await in_thread(lambda: do_expire_due(now=timezone.now() + timedelta(seconds=61)))()
            return await until(ws, lambda m: row(request_) in m)

    assert "↑ from refunds" in asyncio.run(scenario())


def test_a_decision_page_socket_admits_only_those_who_may_see_the_thread(live_server_url: str) -> None:
    make_user("rita", "reviewer", queues=("refunds",))
    sam_cookie = cookie_for("sam", "reviewer", queues=("outreach",))
    rita_client = Client()
    rita_client.login(username="rita", password="pw-for-tests-only")
    request_ = make_gate()

    async def close_code(cookie: str) -> int | None:
        url = live_server_url.replace("http://", "ws://") + f"/ws/threads/{request_.thread_id}/"
        headers = {"Cookie": f"sessionid={cookie}"}
        try:
            async with websockets.connect(url, additional_headers=headers, origin=live_server_url) as ws:  # type: ignore[arg-type]
                await asyncio.wait_for(ws.recv(), 0.5)
        except TimeoutError:
            return None  # accepted: nothing to say yet
        except websockets.InvalidStatus as exc:
            return exc.response.status_code
        return None

    assert asyncio.run(close_code(sam_cookie)) == 403
    assert asyncio.run(close_code(rita_client.cookies["sessionid"].value)) is None


def test_a_step_follow_up_sent_again_shows_an_inbox_the_gate_whose_push_was_lost(
    live_server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A step whose commit landed with its reply lost sends its follow-up again (agents.runtime):
    # the gate's own push went with the lost connection, so open inboxes are told again.
    from agents import signals
    from approvals import events

    cookie = cookie_for("rita", "reviewer")

    async def scenario() -> None:
        async with await connect(live_server_url, cookie) as ws:
            await until(ws, lambda m: 'id="inbox-list"' in m)  # the catch-up, before the gate
            with monkeypatch.context() as lost:
                lost.setattr(events, "send_requests_opened", lambda **kwargs: None)
                request_ = await in_thread(make_gate)()
            await in_thread(
                lambda: signals.thread_changed.send(
                    sender=None,
                    thread_id=request_.thread_id,
                    checkpoint_id=str(request_.checkpoint_id),
                    status="waiting",
                    resent=True,
                )
            )()
            await until(ws, lambda m: row(request_) in m)

    asyncio.run(scenario())
