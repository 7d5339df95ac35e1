"""Queues: who sees what, the inbox's filters and its per-queue counts."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from approvals import selectors
from approvals.access import Access
from approvals.actions.decisions import DecisionConflict, NotAllowed, check_decision, do_decide
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, Queue
from approvals.selectors import InboxFilter
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello"}


def outreach_gate() -> ApprovalRequest:
    return make_gate(agent="outreach", action="send_email", args=EMAIL)


def test_a_queue_without_groups_is_open_to_every_reviewer() -> None:
    rita = make_user("rita", "reviewer")
    Queue.objects.create(name="refunds")  # a row, but no groups: still open
    request_ = make_gate()

    assert [r.pk for r in selectors.pending_requests(rita)] == [request_.pk]
    assert Access(rita).can_decide("refunds")


def test_a_restricted_queue_is_seen_and_decided_only_by_its_groups() -> None:
    rita = make_user("rita", "reviewer", queues=("refunds",))
    sam = make_user("sam", "reviewer", queues=("outreach",))
    refund, email = make_gate(), outreach_gate()

    assert [r.pk for r in selectors.pending_requests(rita)] == [refund.pk]
    assert [r.pk for r in selectors.pending_requests(sam)] == [email.pk]
    with pytest.raises(NotAllowed):
        check_decision(refund, user=sam, decision="approve")
    assert "refunds" not in selectors.visible_queues(sam)


def test_admins_see_every_queue_and_operators_see_only_open_ones() -> None:
    make_user("rita", "reviewer", queues=("refunds",))
    ada, olga = make_user("ada", "admin"), make_user("olga", "operator")
    refund, email = make_gate(), outreach_gate()

    assert {r.pk for r in selectors.pending_requests(ada)} == {refund.pk, email.pk}
    assert [r.pk for r in selectors.pending_requests(olga)] == [email.pk]
    assert not Access(olga).can_decide("outreach")


def test_someone_outside_a_restricted_queue_gets_404_for_its_request_page_and_api() -> None:
    make_user("rita", "reviewer", queues=("refunds",))
    sam = make_user("sam", "reviewer")
    request_ = make_gate()
    client = Client()
    client.force_login(sam)

    assert client.get(f"/approvals/{request_.pk}/").status_code == 404
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=sam)}"})
    response = api.post(
        f"/api/approvals/{request_.pk}/decision", {"decision": "approve"}, content_type="application/json"
    )
    assert response.status_code == 404
    assert api.get("/api/approvals").json() == []


def test_a_group_added_to_a_queue_in_admin_grants_its_members_access() -> None:
    make_user("rita", "reviewer", queues=("refunds",))
    sam = make_user("sam", "reviewer")
    request_ = make_gate()
    assert not Access(sam).can_see_queue("refunds")

    seniors = Group.objects.create(name="seniors")
    Queue.objects.get(name="refunds").groups.add(seniors)
    sam.groups.add(seniors)

    valid = check_decision(request_, user=sam, decision="approve")
    assert do_decide(request_, reviewer=sam, valid=valid).status == "approved"


def test_the_inbox_is_oldest_first_and_filters_by_queue_agent_and_age() -> None:
    rita = make_user("rita", "reviewer")
    old, email, new = make_gate(), outreach_gate(), make_gate()
    ApprovalRequest.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=2))

    assert [r.pk for r in selectors.pending_requests(rita)] == [old.pk, email.pk, new.pk]
    assert [r.pk for r in selectors.pending_requests(rita, InboxFilter(queue="outreach"))] == [email.pk]
    assert [r.pk for r in selectors.pending_requests(rita, InboxFilter(agent="refunds"))] == [old.pk, new.pk]
    assert [r.pk for r in selectors.pending_requests(rita, InboxFilter(min_age_s=3600))] == [old.pk]


def test_queue_counts_list_every_visible_queue_with_pending_and_claimed() -> None:
    rita = make_user("rita", "reviewer")
    first, _ = make_gate(), make_gate()
    ApprovalRequest.objects.filter(pk=first.pk).update(claimed_by=rita)

    counts = {q.name: (q.pending, q.claimed) for q in selectors.queue_counts(rita)}

    assert counts == {"refunds": (2, 1), "outreach": (0, 0)}


def test_the_inbox_page_filters_and_refuses_unknown_filter_values() -> None:
    make_gate()
    outreach_gate()
    client = Client()
    client.force_login(make_user("rita", "reviewer"))

    page = client.get("/", {"queue": "outreach"}).content.decode()
    assert "send_email" in page and "issue_refund" not in page
    bad = client.get("/", {"queue": "nope", "age": "forever"})
    assert bad.status_code == 400
    assert "Those filters are not valid" in bad.content.decode()


def test_the_inbox_page_filters_by_age_and_agent_and_says_when_nothing_matches() -> None:
    old, new = make_gate(), make_gate()
    ApprovalRequest.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=2))
    client = Client()
    client.force_login(make_user("rita", "reviewer"))

    waiting_an_hour = client.get("/", {"age": "3600"}).content.decode()
    assert f'id="approval-{old.pk}"' in waiting_an_hour and f'id="approval-{new.pk}"' not in waiting_an_hour
    everyone = client.get("/", {"agent": "refunds"}).content.decode()
    assert f'id="approval-{old.pk}"' in everyone and f'id="approval-{new.pk}"' in everyone
    a_day = client.get("/", {"age": "86400"}).content.decode()
    assert "Nothing here matches these filters." in a_day and f'id="approval-{old.pk}"' not in a_day


def test_a_claimed_request_may_be_decided_only_by_its_claimer() -> None:
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    request_ = make_gate()
    ApprovalRequest.objects.filter(pk=request_.pk).update(claimed_by=sam, claim_active_at=timezone.now())

    with pytest.raises(DecisionConflict) as error:
        do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))

    assert str(error.value) == "Claimed by sam: ask them to release it, or an admin to reassign it."
    decided = do_decide(request_, reviewer=sam, valid=check_decision(request_, user=sam, decision="approve"))
    assert (decided.status, decided.claimed_by) == ("approved", None)


def test_a_queue_only_a_route_policy_names_is_listed_and_its_filter_shows_its_requests() -> None:
    from approvals.actions.policies import do_create_policy

    do_create_policy(
        actor=None,
        fields={"name": "vip", "tool": "issue_refund", "when": "true", "action": "route", "queue": "vip"},
    )
    routed = make_gate()
    assert ApprovalRequest.objects.get(pk=routed.pk).queue == "vip"
    page = Client()
    page.force_login(make_user("rita", "reviewer"))

    inbox = page.get("/").content.decode()
    filtered = page.get("/", {"queue": "vip"})

    assert 'href="?queue=vip"' in inbox
    assert filtered.status_code == 200
    assert f'id="approval-{routed.pk}"' in filtered.content.decode()
