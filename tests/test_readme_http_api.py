"""The README's "HTTP API" table, row by row where no other test drives the promise: a release
past the deadline, the superseded list's order and paging, an undone request as a cursor, the
diff's default end, a state edit that changes nothing, and the thread's documented shape."""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings

from agents.tools import Expiry
from approvals.actions.claims import do_claim
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.threads import do_control
from approvals.actions.tokens import do_create_token
from approvals.actions.undo import do_undo
from approvals.models import ApprovalRequest, AuditEvent
from approvals.tests.helpers import gate_with_expiry
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def api(user: User) -> Client:
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=user)}"})


def test_a_release_past_the_deadline_is_allowed_where_a_claim_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    rita = make_user("rita", "reviewer")
    request_ = gate_with_expiry(monkeypatch, Expiry(60, "reject"))
    do_claim(request_.pk, user=rita)
    ApprovalRequest.objects.filter(pk=request_.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    response = api(rita).post(
        f"/api/approvals/{request_.pk}/claim", {"op": "release"}, content_type="application/json"
    )

    assert response.status_code == 200, response.content
    assert response.json()["claimed_by"] is None
    assert ApprovalRequest.objects.get(pk=request_.pk).claimed_by is None


def test_superseded_requests_list_newest_raised_first_and_page_before_the_last() -> None:
    ada = make_user("ada", "admin")
    raised = [make_gate() for _ in range(3)]
    for request_ in reversed(raised):  # cancelled newest first: the order of raising still rules
        do_control(request_.thread_id, user=ada, verb="cancel")
    client = api(ada)

    def listed(**params: Any) -> list[int]:
        response = client.get("/api/approvals", {"status": "superseded", **params})
        assert response.status_code == 200, response.content
        return [r["id"] for r in response.json()]

    newest_first = [r.pk for r in reversed(raised)]
    assert listed() == newest_first
    assert listed(limit=2) == newest_first[:2]
    assert listed(before=newest_first[1]) == newest_first[2:]


def test_a_decided_list_refuses_an_undone_request_as_its_cursor(settings: Settings) -> None:
    settings.DECISION_UNDO_S = 30
    rita = make_user("rita", "reviewer")
    kept, undone = make_gate(), make_gate()
    for request_ in (kept, undone):
        do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))
    do_undo(undone.pk, user=rita)

    response = api(rita).get("/api/approvals", {"status": "approved", "before": str(undone.pk)})

    assert response.status_code == 400, response.content
    assert set(response.json()["errors"]) == {"before"}
    assert [r["id"] for r in api(rita).get("/api/approvals", {"status": "approved"}).json()] == [kept.pk]


def test_a_diff_without_to_compares_the_checkpoint_with_the_head() -> None:
    olga = make_user("olga", "operator", "admin")
    thread_id = make_gate().thread_id
    head = get_backend().get(thread_id=thread_id)
    first = Checkpoint.objects.filter(thread_id=thread_id).order_by("step").first()
    assert first is not None and str(first.pk) != head.id
    client = api(olga)

    to_head = client.get(f"/api/threads/{thread_id}/diff", {"from": str(first.pk)})
    explicit = client.get(f"/api/threads/{thread_id}/diff", {"from": str(first.pk), "to": head.id})

    assert to_head.status_code == 200, to_head.content
    assert to_head.json() == explicit.json() != []


def test_a_state_edit_that_changes_nothing_is_a_409_that_writes_nothing() -> None:
    olga = make_user("olga", "operator")
    thread_id = make_gate().thread_id
    do_control(thread_id, user=olga, verb="pause")
    values = get_backend().get(thread_id=thread_id).values
    before = (Checkpoint.objects.count(), AuditEvent.objects.count(), ApprovalRequest.objects.count())

    unchanged = {"values": {"messages": values["messages"]}}
    response = api(olga).patch(f"/api/threads/{thread_id}/state", unchanged, content_type="application/json")

    assert response.status_code == 409, response.content
    assert set(response.json()) == {"detail", "errors"}
    assert (Checkpoint.objects.count(), AuditEvent.objects.count(), ApprovalRequest.objects.count()) == before


def test_a_thread_reads_with_the_fields_the_readme_lists() -> None:
    gate = make_gate()

    thread = api(make_user("ada", "admin")).get(f"/api/threads/{gate.thread_id}").json()

    assert set(thread) == {
        "id",
        "agent",
        "status",
        "values",
        "head",
        "pending_approvals",
        "error",
        "offline_model",
        "tenant",
        "created_at",
        "updated_at",
    }
    assert (thread["status"], [a["id"] for a in thread["pending_approvals"]]) == ("waiting", [gate.pk])
    keys = {"id", "thread_id", "action", "args", "allowed_decisions", "status", "created_at", "decided_at"}
    assert keys <= set(thread["pending_approvals"][0])


def test_a_history_page_before_a_checkpoint_of_another_thread_is_a_404() -> None:
    ada = make_user("ada", "admin")
    mine, other = make_gate(), make_gate()
    client = api(ada)

    response = client.get(f"/api/threads/{mine.thread_id}/history", {"before": str(other.checkpoint_id)})

    assert response.status_code == 404, response.content
    assert set(response.json()) == {"detail", "errors"}
    newest_first = client.get(f"/api/threads/{mine.thread_id}/history").json()
    paged = client.get(f"/api/threads/{mine.thread_id}/history", {"before": newest_first[0]["id"]}).json()
    assert paged == newest_first[1:]


@pytest.mark.parametrize("field", ["created_after", "created_before"])
@pytest.mark.parametrize("value", ["yesterday", "2026-13-01", "1700000000x"])
def test_a_thread_list_date_it_cannot_read_is_a_400_naming_it(field: str, value: str) -> None:
    make_gate()

    response = api(make_user("ada", "admin")).get("/api/threads", {field: value})

    assert response.status_code == 400, response.content
    assert list(response.json()["errors"]) == [f"query.{field}"]
