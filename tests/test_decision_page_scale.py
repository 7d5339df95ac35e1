"""A decision page asked deep in a long thread stays light: it shows the newest part of the
conversation as asked (the gated call always on screen) with a pager to earlier messages on the
decision page itself, pairs every tag as the whole conversation would, reads the same number of
queries however long the thread, and refuses a page the conversation does not have."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.conversation import CONVERSATION_PAGE
from approvals.models import ApprovalRequest, ApprovalStatus
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import CheckpointSource, ThreadStatus
from tests.factories import make_user
from tests.test_thread_page_scale import (  # noqa: F401  (requests_loaded: a fixture)
    add_requests,
    client_for,
    long_thread,
    refund_call,
    requests_loaded,
    shown_turns,
    tag_of_turn,
)

pytestmark = pytest.mark.django_db

ASKED = {"role": "user", "content": "Now refund the big one, please."}


def asked_deep(*, turns: int, statuses: dict[str, str] | None = None) -> ApprovalRequest:
    """A request asked at a checkpoint holding long_thread's messages, ASKED and the gated call
    (call_gate, "the gated call"): 2 + 2 * turns + 2 messages. Requests for the earlier calls
    (`statuses`) are asked at that checkpoint too; then the thread moves on (the tool's result),
    so the page shows the conversation as asked, not the thread's head."""
    call = {**refund_call(10_000), "id": "call_gate"}
    gated = {"role": "assistant", "content": "the gated call", "tool_calls": [call]}
    first = long_thread(turns=turns, extra=[ASKED, gated])
    add_requests(first, {"call_gate": ApprovalStatus.APPROVED, **(statuses or {})})
    moved_on(first.thread_id)
    return ApprovalRequest.objects.get(thread_id=first.thread_id, key="call_gate")


def moved_on(thread_id: str) -> None:
    """The thread one step on from its head: the gated call's result."""
    backend = get_backend()
    head = backend.get(thread_id=thread_id)
    result = {"role": "tool", "tool_call_id": "call_gate", "content": "refunded"}
    backend.put(
        thread_id=thread_id,
        parent_id=head.id,
        expected_head=head.id,
        status=ThreadStatus.WAITING,
        checkpoint=NewCheckpoint(
            values={**head.values, "messages": [*head.values["messages"], result]},
            source=CheckpointSource.STEP,
            node="tools",
        ),
    )


def asked_pane(html: str) -> str:
    """The conversation as asked, without the thread now."""
    start = html.index('<div class="asked-conversation">')
    return html[start : html.index('<details class="thread-now">', start)]


EVERY_THIRD = ApprovalStatus.APPROVED


def turns_tagged(turns: int) -> dict[str, str]:
    """A request for every third earlier call, approved."""
    return {f"call_{n}": EVERY_THIRD for n in range(0, turns, 3)}


def test_a_request_deep_in_a_long_thread_shows_the_newest_asked_messages_and_its_gated_call(
    requests_loaded: list[int],  # noqa: F811  (the fixture)
) -> None:
    item = asked_deep(turns=998, statuses=turns_tagged(998))  # 2,000 messages, 334 requests
    client = client_for("olga", "admin")
    requests_loaded.clear()

    html = client.get(f"/approvals/{item.pk}/").content.decode()

    pane = asked_pane(html)
    assert pane.count('<li class="msg ') == CONVERSATION_PAGE
    assert shown_turns(pane) == list(range(949, 998))  # then ASKED and the gated call
    assert "the gated call" in pane.split('<li class="msg ')[-1]  # the newest message shown
    assert tag_of_turn(pane.replace(">the gated call<", ">turn 10000<"), 10000) == "approved"
    assert "Messages 1901 to 2000 of 2000" in pane
    assert f'href="/approvals/{item.pk}/?asked_before=1900" rel="prev"' in pane
    # The requests of the calls shown, the thread now's (17 each) and the page's own; never all 334.
    assert len(requests_loaded) <= 2 * 17 + 1


def test_the_decision_page_costs_the_same_queries_for_2000_messages_and_300_requests_as_for_a_few() -> None:
    short = asked_deep(turns=60, statuses=turns_tagged(60))
    long = asked_deep(turns=998, statuses=turns_tagged(998))
    client = client_for("olga", "admin")
    client.get(f"/approvals/{short.pk}/")  # caches warm (sessions, the agent registry)
    counted, pages = [], []
    for item, query in [
        (short, {}),
        (long, {}),
        (short, {"asked_before": "50"}),
        (long, {"asked_before": "1000"}),
    ]:
        with CaptureQueriesContext(connection) as queries:
            pages.append(client.get(f"/approvals/{item.pk}/", query).content.decode())
        counted.append(len(queries))

    assert counted[0] == counted[1] and counted[2] == counted[3]
    assert "Messages 901 to 1000 of 2000" in asked_pane(pages[3])


def test_following_the_earlier_links_shows_every_asked_message_once_each_tag_on_its_own_call() -> None:
    statuses = [ApprovalStatus.APPROVED, ApprovalStatus.REJECTED, ApprovalStatus.EXPIRED]
    item = asked_deep(turns=150, statuses={f"call_{n}": statuses[n % 3] for n in range(150)})
    client = client_for("olga", "admin")

    url = f"/approvals/{item.pk}/"
    pages = []
    while url:
        html = client.get(url).content.decode()
        pages.append(asked_pane(html))
        older = re.search(r'href="(/approvals/\d+/\?asked_before=\d+)" rel="prev"', asked_pane(html))
        url = older.group(1) if older else ""

    assert len(pages) == 4  # 304 messages: 100, 100, 100 and the first 4
    turns = [n for pane in reversed(pages) for n in shown_turns(pane)]
    assert turns == list(range(150))
    for pane in pages:
        for n in shown_turns(pane):
            assert tag_of_turn(pane, n) == statuses[n % 3]
    assert "Please refund order ORD-1001" in pages[-1] and "Please refund order" not in pages[0]


def test_an_earlier_page_keeps_the_gated_call_in_sight_below_it() -> None:
    item = asked_deep(turns=150, statuses={"call_10": ApprovalStatus.REJECTED})
    client = client_for("olga", "admin")

    pane = asked_pane(client.get(f"/approvals/{item.pk}/", {"asked_before": "52"}).content.decode())

    assert shown_turns(pane) == list(range(25))
    assert tag_of_turn(pane, 10) == "rejected"
    assert "Messages 1 to 52 of 304" in pane
    gate = pane[pane.index("data-asked-gate") :]
    assert "the gated call" in gate and 'class="tag decision-approved">approved' in gate
    assert f'<a href="/approvals/{item.pk}/" data-key="newest-asked">Newest messages' in pane


def test_requests_an_adapter_keyed_otherwise_pair_in_order_across_asked_pages() -> None:
    # Two calls alike (a LangGraph interrupt names no call): the older request answers the earlier.
    same = {"order_id": "ORD-SAME", "amount_cents": 100}
    item = asked_deep(turns=120)
    backend = get_backend()
    asked = backend.get(thread_id=item.thread_id, checkpoint_id=str(item.checkpoint_id))
    messages = asked.values["messages"]
    for n in (10, 110):
        messages[2 + 2 * n]["tool_calls"] = [refund_call(n, args=same)]
    ApprovalRequest.objects.filter(thread_id=item.thread_id).exclude(pk=item.pk).delete()
    backend.put(  # the same conversation, asked again at a checkpoint that has the two calls alike
        thread_id=item.thread_id,
        parent_id=backend.get(thread_id=item.thread_id).id,
        expected_head=backend.get(thread_id=item.thread_id).id,
        status=ThreadStatus.WAITING,
        checkpoint=NewCheckpoint(values={**asked.values, "messages": messages}, source=CheckpointSource.STEP),
    )
    add_requests(
        item, {"interrupt-a:0": ApprovalStatus.APPROVED, "interrupt-b:0": ApprovalStatus.REJECTED}, args=same
    )
    ApprovalRequest.objects.filter(pk=item.pk).update(checkpoint_id=backend.get(thread_id=item.thread_id).id)
    moved_on(item.thread_id)
    client = client_for("olga", "admin")

    newest = asked_pane(client.get(f"/approvals/{item.pk}/").content.decode())
    earlier = asked_pane(client.get(f"/approvals/{item.pk}/", {"asked_before": "102"}).content.decode())

    assert 110 in shown_turns(newest) and 10 not in shown_turns(newest)
    assert tag_of_turn(newest, 110) == "rejected"
    assert tag_of_turn(earlier, 10) == "approved"


@pytest.mark.parametrize("before", ["0", "-1", "abc", "2.5", "²", "305", "9" * 40, " 5"])
def test_a_page_of_asked_messages_the_conversation_does_not_have_is_not_found_and_touches_nothing(
    before: str,
) -> None:
    item = asked_deep(turns=100)
    olga = make_user("olga", "admin")
    idle = timezone.now() - timedelta(hours=1)
    ApprovalRequest.objects.filter(pk=item.pk).update(
        status=ApprovalStatus.PENDING, claimed_by=olga, claimed_at=idle, claim_active_at=idle
    )
    client = Client()
    client.force_login(olga)

    response = client.get(f"/approvals/{item.pk}/", {"asked_before": before})

    assert response.status_code == 404
    assert ApprovalRequest.objects.get(pk=item.pk).claim_active_at == idle


def test_an_empty_page_parameter_is_the_newest_page() -> None:
    item = asked_deep(turns=100)
    client = client_for("olga", "admin")

    newest = asked_pane(client.get(f"/approvals/{item.pk}/").content.decode())
    empty = asked_pane(client.get(f"/approvals/{item.pk}/", {"asked_before": ""}).content.decode())

    assert shown_turns(empty) == shown_turns(newest) == list(range(51, 100))
