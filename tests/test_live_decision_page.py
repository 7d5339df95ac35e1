"""A decision page's socket receives only what its page shows: its own request's panel (the
same one a reload renders) and the thread's conversation, never a sibling request's panel.
Real uvicorn, real Redis channel layer."""

import asyncio
import contextlib
import re
from typing import Any

import pytest
from django.test import Client

from approvals.models import ApprovalRequest
from tests.factories import make_gate, make_user
from tests.test_inbox_live import cookie_for, in_thread, until
from tests.test_live_access import decide, thread_socket

pytestmark = pytest.mark.django_db(transaction=True)


def sibling(request_: ApprovalRequest) -> ApprovalRequest:
    """Another pending request at the same gate of the same thread (a parallel call)."""
    other = ApprovalRequest.objects.get(pk=request_.pk)
    other.pk, other.key = None, f"{request_.key}-parallel"
    other.save()
    return other


async def drain(ws: Any, seen: list[str], *, quiet_s: float = 1.0) -> None:
    with contextlib.suppress(TimeoutError):
        while True:
            seen.append(str(await asyncio.wait_for(ws.recv(), quiet_s)))


def test_a_decision_page_gets_its_own_requests_panel_and_never_a_sibling_requests(
    live_server_url: str,
) -> None:
    cookie = cookie_for("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    own = make_gate()
    other = sibling(own)

    async def scenario() -> list[str]:
        seen: list[str] = []
        async with thread_socket(live_server_url, own.thread_id, cookie, f"?request={own.pk}") as ws:
            await drain(ws, seen, quiet_s=0.5)  # the catch-up
            await in_thread(lambda: decide(other, by=sam, message="not this page's"))()
            await in_thread(lambda: decide(own, by=sam, message="this page's"))()
            seen.append(await until(ws, lambda m: f'id="decision-panel-{own.pk}"' in m, timeout=3))
            await drain(ws, seen)
        return seen

    seen = asyncio.run(scenario())
    assert not [m for m in seen if f"decision-panel-{other.pk}" in m or f"request-status-{other.pk}" in m]
    assert [m for m in seen if "Already rejected by sam" in m]


def panel_of(html: str, pk: int) -> str:
    """The panel's markup, without what differs between a page and a push by design (the CSRF
    field a push cannot carry, the out-of-band attribute, whitespace)."""
    start = html.index(f'<div id="decision-panel-{pk}"')
    end = html.find("</section>", start)
    panel = html[start : end if end >= 0 else len(html)]
    panel = re.sub(r'<input type="hidden" name="csrfmiddlewaretoken"[^>]*>', "", panel)
    panel = panel.replace(' hx-swap-oob="true"', "")
    return re.sub(r"\s+", " ", panel).strip()


def test_a_pushed_closed_panel_is_the_panel_a_reload_renders(live_server_url: str, settings: Any) -> None:
    settings.DECISION_UNDO_S = 0  # no countdown: the two renders are a second apart
    cookie = cookie_for("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    request_ = make_gate(model_text="The order is delivered and within 30 days, so I will refund it.")

    async def scenario() -> str:
        async with thread_socket(
            live_server_url, request_.thread_id, cookie, f"?request={request_.pk}"
        ) as ws:
            await asyncio.sleep(0.3)  # accepted and joined
            await in_thread(lambda: decide(request_, by=sam, message="not today"))()
            return await until(ws, lambda m: "Already rejected by sam" in m, timeout=3)

    pushed = panel_of(asyncio.run(scenario()), request_.pk)
    rita = Client()
    assert rita.login(username="rita", password="pw-for-tests-only")
    reloaded = panel_of(rita.get(f"/approvals/{request_.pk}/").content.decode(), request_.pk)
    assert "Already rejected by sam" in pushed
    assert "Agent's reasoning" in pushed and "Please refund order ORD-1001" in pushed
    assert pushed == reloaded
