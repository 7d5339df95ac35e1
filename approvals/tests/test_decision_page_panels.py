"""The decision panel as a page and its pushes show it: a superseded request's panel learns
of the request that asks it again, however late that one is linked; a request past its
deadline offers no decision that would only be refused. Django's test client, and the
consumer's own render (approvals.consumers.ThreadConsumer), without a socket."""

from datetime import timedelta

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
