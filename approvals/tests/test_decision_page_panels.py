"""The decision panel as a page and its pushes show it: a superseded request's panel learns
of the request that asks it again, however late that one is linked; a request past its
deadline offers no decision that would only be refused; the page costs a fixed number of
queries, an earlier page of the conversation as asked (the gated call pinned below it) no more
than the newest. Django's test client, and the consumer's own render
(approvals.consumers.ThreadConsumer), without a socket."""

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from agents.tools import Expiry
from approvals import decision_page
from approvals.consumers import ThreadConsumer
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.tests.helpers import gate_with_expiry
from tests.factories import make_gate, make_user
from tests.test_decision_page_scale import asked_deep

pytestmark = pytest.mark.django_db


def fresh(request_: ApprovalRequest) -> ApprovalRequest:
    return ApprovalRequest.objects.get(pk=request_.pk)


def open_page(request_: ApprovalRequest, *, user: User) -> ThreadConsumer:
    """A decision page's socket as it connected: its request, and the mark of the panel it shows."""
    consumer = ThreadConsumer()
    consumer.scope = {"user": user}
    consumer.thread_id, consumer.request_id = request_.thread_id, request_.pk
    consumer.panel_mark = decision_page.decision_context(fresh(request_), user=user)["panel_mark"]
    return consumer


def test_a_superseded_panel_repaints_when_the_request_asking_it_again_is_linked_later() -> None:
    rita = make_user("rita", "reviewer")
    original = make_gate()
    # The operator's edit closes it first: its panel is pushed, with nothing to point to yet.
    ApprovalRequest.objects.filter(pk=original.pk).update(status=ApprovalStatus.SUPERSEDED)
    page = open_page(original, user=rita)
    assert "Asked again as" not in page._render_decision(fresh(original), with_status=False)

    # The re-run step then opens the gate again and links it (gates._link_to_originals).
    again = make_gate()
    ApprovalRequest.objects.filter(pk=again.pk).update(supersedes_id=original.pk)
    pushed = page._render_decision(fresh(original), with_status=False)

    assert f'id="decision-panel-{original.pk}"' in pushed
    assert f'Asked again as <a href="/approvals/{again.pk}/">request #{again.pk}</a> (pending)' in pushed


def test_a_superseded_panel_repaints_when_its_replacement_is_decided() -> None:
    rita = make_user("rita", "reviewer")
    original, again = make_gate(), make_gate()
    ApprovalRequest.objects.filter(pk=original.pk).update(status=ApprovalStatus.SUPERSEDED)
    ApprovalRequest.objects.filter(pk=again.pk).update(supersedes_id=original.pk)
    page = open_page(original, user=rita)
    ApprovalRequest.objects.filter(pk=again.pk).update(status=ApprovalStatus.REJECTED)

    assert f"request #{again.pk}</a> (rejected)" in page._render_decision(fresh(original), with_status=False)


def past_its_deadline(request_: ApprovalRequest) -> None:
    ApprovalRequest.objects.filter(pk=request_.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


@pytest.mark.parametrize(
    ("expiry", "then"),
    [
        (Expiry(60, "reject"), "rejected automatically"),
        (Expiry(60, "escalate", to_queue="supervisors"), "escalated to supervisors"),
    ],
    ids=["reject", "escalate"],
)
def test_a_request_past_its_deadline_offers_no_decision_on_its_page_nor_after_a_409(
    monkeypatch: pytest.MonkeyPatch, expiry: Expiry, then: str
) -> None:
    rita = make_user("rita", "reviewer")
    request_ = gate_with_expiry(monkeypatch, expiry)
    later = make_gate()  # the page's next item
    past_its_deadline(request_)
    client = Client()
    client.force_login(rita)

    page = client.get(f"/approvals/{request_.pk}/").content.decode()
    refused = client.post(
        f"/approvals/{request_.pk}/", {"decision": "approve"}, headers={"HX-Request": "true"}
    )

    assert refused.status_code == 409
    notice = f"This request expired: nobody decided it in time; it is being {then}."
    for panel in (page, refused.content.decode()):
        assert notice in panel
        assert "It leaves your queue at the next sweep." in panel
        assert "is for its reviewers" not in panel  # she is one: it expired, nobody may decide it
        assert f'href="/approvals/{later.pk}/" data-nav="next">Next item' in panel
        for offer in ('value="approve"', 'value="edit"', 'value="reject"', 'value="claim"'):
            assert offer not in panel
    assert fresh(request_).status == ApprovalStatus.PENDING


def test_a_request_before_its_deadline_still_offers_its_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    rita = make_user("rita", "reviewer")
    request_ = gate_with_expiry(monkeypatch, Expiry(60, "reject"))
    client = Client()
    client.force_login(rita)

    page = client.get(f"/approvals/{request_.pk}/").content.decode()

    assert "This request expired" not in page
    for offer in ('value="approve"', 'value="edit"', 'value="reject"', 'value="claim"'):
        assert offer in page


DECISION_PAGE_QUERIES = 16
"""A reviewer's decision page of a thread waiting at the request: the session, the user and their
groups and queues, the request, its checkpoint and values, its neighbours in the queue, the
thread, the requests its conversation shows, effects done, policies, the claim's touch."""
MOVED_ON_QUERIES = DECISION_PAGE_QUERIES + 3
"""The same once the thread moved on: the head and its values as well, and the requests the
conversation as asked shows (with the gated call pinned below an earlier page: one query)."""

NumQueries = Callable[[int], AbstractContextManager[Any]]


def test_the_decision_page_costs_a_fixed_number_of_queries(django_assert_num_queries: NumQueries) -> None:
    item = make_gate()
    client = Client()
    client.force_login(make_user("rita", "reviewer"))
    client.get(f"/approvals/{item.pk}/")  # caches warm (the agent registry)

    with django_assert_num_queries(DECISION_PAGE_QUERIES):
        response = client.get(f"/approvals/{item.pk}/")

    assert response.status_code == 200


def test_an_earlier_page_of_the_conversation_as_asked_reads_its_requests_and_the_pinned_calls_in_one_query(
    django_assert_num_queries: NumQueries,
) -> None:
    # The thread moved on: the page shows the conversation as asked beside the thread now.
    item = asked_deep(turns=150, statuses={"call_10": ApprovalStatus.REJECTED})
    client = Client()
    client.force_login(make_user("rita", "reviewer"))
    client.get(f"/approvals/{item.pk}/")  # caches warm (the agent registry)
    pages = []

    for query in ({}, {"asked_before": "52"}):
        with django_assert_num_queries(MOVED_ON_QUERIES):
            pages.append(client.get(f"/approvals/{item.pk}/", query).content.decode())

    newest, earlier = pages
    assert "data-asked-gate" not in newest  # the gated call is on the newest page itself
    gate = earlier[earlier.index("data-asked-gate") :]
    assert "the gated call" in gate and 'class="tag decision-approved">approved' in gate
