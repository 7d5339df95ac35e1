"""An open page's socket answers to the same rights as the page, for as long as it stays open.

A socket is checked when it opens and again every LIVE_REJOIN_S: once its user is logged out,
deactivated, or loses the role or the queue the page needed, it closes (4401 or 4403), as the
page's next load would be refused. And a thread's socket receives only its own thread's pushes.
Real uvicorn, real Redis channel layer.
"""

import asyncio
import contextlib
from collections.abc import Callable
from functools import partial
from importlib import import_module
from typing import Any

import pytest
import websockets
from django.conf import settings
from django.contrib.auth.models import User

from approvals.actions.decisions import check_decision, do_decide
from approvals.models import ApprovalRequest
from tests.factories import make_gate, make_user
from tests.test_inbox_live import connect, cookie_for, in_thread, row, until

pytestmark = pytest.mark.django_db(transaction=True)

BOUND_S = settings.LIVE_REJOIN_S + 4  # one re-check period, then the close


async def close_code(ws: Any, timeout: float = BOUND_S) -> int:
    """Read until the server closes the socket; its close code."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                await ws.recv()
    except websockets.ConnectionClosed as closed:
        assert closed.rcvd is not None, "closed without a close frame"
        return int(closed.rcvd.code)


def thread_socket(live_server_url: str, thread_id: str, cookie: str, query: str = "") -> Any:
    url = live_server_url.replace("http://", "ws://") + f"/ws/threads/{thread_id}/{query}"
    headers = {"Cookie": f"sessionid={cookie}"}
    return websockets.connect(url, additional_headers=headers, origin=live_server_url)  # type: ignore[arg-type]


def log_out(cookie: str) -> None:
    import_module(settings.SESSION_ENGINE).SessionStore(cookie).delete()


def deactivate(username: str) -> None:
    User.objects.filter(username=username).update(is_active=False)


def take_every_group(username: str) -> None:
    User.objects.get(username=username).groups.clear()


def change_password(username: str) -> None:
    user = User.objects.get(username=username)
    user.set_password("a-new-password-for-tests")
    user.save()


def test_an_open_inbox_closes_once_its_user_is_logged_out_deactivated_or_loses_their_role(
    live_server_url: str,
) -> None:
    changes: dict[str, tuple[Callable[[str, str], None], int]] = {
        "lou": (lambda name, cookie: log_out(cookie), 4401),
        "dora": (lambda name, cookie: deactivate(name), 4401),
        "pat": (lambda name, cookie: change_password(name), 4401),
        "rolf": (lambda name, cookie: take_every_group(name), 4403),
    }
    cookies = {name: cookie_for(name, "reviewer") for name in [*changes, "sam"]}

    async def scenario() -> tuple[dict[str, int], str]:
        sockets = {name: await connect(live_server_url, cookie) for name, cookie in cookies.items()}
        for ws in sockets.values():
            await until(ws, lambda m: 'id="inbox-list"' in m)
        for name, (change, _) in changes.items():
            await in_thread(partial(change, name, cookies[name]))()
        codes = dict(
            zip(changes, await asyncio.gather(*(close_code(sockets[name]) for name in changes)), strict=True)
        )
        request_ = await in_thread(make_gate)()  # the reviewer who kept their rights still sees it
        seen = await until(sockets["sam"], lambda m: row(request_) in m)
        await sockets["sam"].close()
        return codes, seen

    codes, seen = asyncio.run(scenario())
    assert codes == {name: code for name, (_, code) in changes.items()}
    assert "issue_refund" in seen


def test_an_open_decision_page_closes_once_its_reviewer_leaves_the_queues_team(live_server_url: str) -> None:
    cookie = cookie_for("rita", "reviewer", queues=("refunds",))
    request_ = make_gate()

    async def scenario() -> int:
        async with thread_socket(live_server_url, request_.thread_id, cookie) as ws:
            await asyncio.sleep(0.2)  # accepted and joined
            await in_thread(lambda: User.objects.get(username="rita").groups.remove(*_teams("rita")))()
            return await close_code(ws)

    assert asyncio.run(scenario()) == 4403


def _teams(username: str) -> list[Any]:
    return list(User.objects.get(username=username).groups.filter(name__endswith="-team"))


def decide(request_: ApprovalRequest, *, by: User, message: str) -> None:
    do_decide(
        request_, reviewer=by, valid=check_decision(request_, user=by, decision="reject", message=message)
    )


def test_a_thread_socket_never_receives_another_threads_pushes_whose_id_differs_only_in_punctuation(
    live_server_url: str,
) -> None:
    cookie = cookie_for("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    other, own = make_gate(thread_id="acme:42"), make_gate(thread_id="acme_42")

    async def scenario() -> list[str]:
        seen: list[str] = []

        def own_decided(message: str) -> bool:
            seen.append(message)
            return f'id="decision-panel-{own.pk}"' in message

        async with thread_socket(live_server_url, "acme_42", cookie, f"?request={own.pk}") as ws:
            await asyncio.sleep(0.2)  # accepted and joined
            await in_thread(lambda: decide(other, by=sam, message="not for acme_42's page"))()
            await in_thread(lambda: decide(own, by=sam, message="for acme_42's page"))()
            await until(ws, own_decided, timeout=2)
        return seen

    seen = asyncio.run(scenario())
    assert not [m for m in seen if f"decision-panel-{other.pk}" in m or "not for acme_42" in m]


def test_a_thread_page_socket_gets_its_own_fragments_not_the_decision_pages(live_server_url: str) -> None:
    # The decision page's panel and status line have no place on the thread page: htmx reported
    # each as an out-of-band swap with no target.
    cookie = cookie_for("olga", "operator")
    sam = make_user("sam", "reviewer")
    request_ = make_gate()

    async def scenario() -> list[str]:
        seen: list[str] = []

        def thread_rendered(message: str) -> bool:
            seen.append(message)
            return 'id="thread-live"' in message or "thread-side" in message

        async with thread_socket(live_server_url, request_.thread_id, cookie, "?view=thread") as ws:
            await asyncio.sleep(0.2)  # accepted and joined
            await in_thread(lambda: decide(request_, by=sam, message="no"))()
            await until(ws, thread_rendered, timeout=3)
            with contextlib.suppress(TimeoutError):  # and whatever follows within a second
                while True:
                    seen.append(str(await asyncio.wait_for(ws.recv(), 1)))
        return seen

    seen = asyncio.run(scenario())
    assert seen and not [m for m in seen if "decision-panel-" in m or "request-status-" in m]


def test_a_sign_off_refreshes_the_conversation_on_the_requests_open_pages(live_server_url: str) -> None:
    """The conversation's tag of a two-person request says who signed off, without a reload."""
    from approvals.tests.test_two_person import big_refund, require

    require(2)
    request_ = big_refund()
    rita = make_user("rita", "reviewer")
    cookie = cookie_for("sam", "reviewer")

    async def scenario() -> str:
        async with thread_socket(live_server_url, request_.thread_id, cookie) as ws:
            await until(ws, lambda m: "0 of 2 approvals" in m)  # the catch-up on connect
            await in_thread(lambda: approve(request_, by=rita))()
            return await until(ws, lambda m: 'id="thread-live"' in m and "1 of 2 approvals: rita" in m)

    assert "1 of 2 approvals: rita" in asyncio.run(scenario())


def approve(request_: ApprovalRequest, *, by: User) -> None:
    do_decide(request_, reviewer=by, valid=check_decision(request_, user=by, decision="approve"))
