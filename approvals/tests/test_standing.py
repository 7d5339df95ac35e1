"""Standing decisions: from the decision page a reviewer approves the tool (or these exact
arguments) for the rest of the thread, optionally until a time; later calls on that thread are
approved automatically; the thread page shows and revokes it; both are in the ledger."""

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from approvals.actions.policies import do_create_policy
from approvals.actions.policy_gates import do_apply_policies
from approvals.actions.standing import STANDING_ORDER
from approvals.actions.tokens import do_create_token
from approvals.actions.undo import do_undo
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent, Policy
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

ARGS = {"order_id": "ORD-1001", "amount_cents": 4250}


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def stand(client: Client, request_: ApprovalRequest, scope: str = "tool", until: str = "") -> Any:
    return client.post(
        f"/approvals/{request_.pk}/", {"decision": "approve", "standing": scope, "until": until}
    )


def next_call(request_: ApprovalRequest, args: dict[str, Any] | None = None) -> ApprovalRequest:
    """Another call of the tool, later on the same thread, through the gate's policies."""
    later = ApprovalRequest.objects.get(pk=request_.pk)
    later.pk, later.key, later.status = None, f"call_{uuid.uuid4().hex[:8]}", ApprovalStatus.PENDING
    later.decided_by, later.decided_at, later.decision_args, later.undo_until = None, None, None, None
    later.args = args if args is not None else request_.args
    later.save()
    do_apply_policies([later], thread_id=later.thread_id, agent=later.agent)
    later.refresh_from_db()
    return later


def test_a_reviewer_approves_the_tool_for_the_rest_of_the_thread() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate(args=ARGS)

    answer = stand(client_for(rita), request_)

    assert answer.status_code == 302
    request_.refresh_from_db()
    assert (request_.status, request_.decided_by) == (ApprovalStatus.APPROVED, rita)
    standing = Policy.objects.get()
    assert (standing.thread_id, standing.tool, standing.agent, standing.when) == (
        request_.thread_id,
        "issue_refund",
        "refunds",
        "true",
    )
    assert (standing.created_by, standing.until, standing.order) == (rita, None, STANDING_ORDER)
    created = AuditEvent.objects.get(action="policy.create")
    assert (created.actor_name, created.thread_id) == ("rita", request_.thread_id)

    later = next_call(request_, {"order_id": "ORD-2002", "amount_cents": 999})
    assert (later.status, later.decided_by, later.policy_id) == (ApprovalStatus.APPROVED, None, standing.pk)
    assert make_gate(args=ARGS).status == ApprovalStatus.PENDING  # another thread: a person decides


def test_these_exact_arguments_approve_only_the_same_call() -> None:
    request_ = make_gate(args=ARGS)

    assert stand(client_for(make_user("rita", "reviewer")), request_, scope="args").status_code == 302

    assert next_call(request_).status == ApprovalStatus.APPROVED
    assert next_call(request_, {**ARGS, "amount_cents": 4251}).status == ApprovalStatus.PENDING


def test_a_standing_decision_ends_at_its_until() -> None:
    request_ = make_gate(args=ARGS)
    until = timezone.localtime() + timedelta(hours=2)

    stand(client_for(make_user("rita", "reviewer")), request_, until=until.strftime("%Y-%m-%dT%H:%M"))

    standing = Policy.objects.get()
    assert standing.until is not None and abs(standing.until - until) < timedelta(minutes=1)
    assert next_call(request_).status == ApprovalStatus.APPROVED
    Policy.objects.filter(pk=standing.pk).update(until=timezone.now() - timedelta(seconds=1))
    assert next_call(request_).status == ApprovalStatus.PENDING


@pytest.mark.parametrize("until", ["2001-01-01T00:00", "not a date", "2999-01-01T00:00"])
def test_a_bad_until_is_a_400_and_decides_nothing(until: str) -> None:
    request_ = make_gate(args=ARGS)

    answer = stand(client_for(make_user("rita", "reviewer")), request_, until=until)

    assert answer.status_code == 400
    assert "Nothing was decided" in answer.content.decode()
    assert ApprovalRequest.objects.get(pk=request_.pk).status == ApprovalStatus.PENDING
    assert not Policy.objects.exists()


def test_an_unknown_scope_or_a_standing_rejection_is_a_400() -> None:
    request_ = make_gate(args=ARGS)
    client = client_for(make_user("rita", "reviewer"))

    assert stand(client, request_, scope="forever").status_code == 400
    rejected = client.post(
        f"/approvals/{request_.pk}/", {"decision": "reject", "message": "no", "standing": "tool"}
    )
    assert rejected.status_code == 400
    assert ApprovalRequest.objects.get(pk=request_.pk).status == ApprovalStatus.PENDING
    assert not Policy.objects.exists()


def test_only_a_reviewer_who_may_decide_the_request_creates_one() -> None:
    request_ = make_gate(args=ARGS)
    assert stand(client_for(make_user("olga", "operator")), request_).status_code == 403
    make_user("sue", "reviewer", queues=("refunds",))  # restricts the refunds queue to its team
    outsider = make_user("otto", "reviewer", queues=("other",))

    assert stand(client_for(outsider), request_).status_code == 404
    assert not Policy.objects.exists()
    assert ApprovalRequest.objects.get(pk=request_.pk).status == ApprovalStatus.PENDING


def test_a_request_needing_two_approvals_cannot_be_made_standing() -> None:
    do_create_policy(
        actor=None, fields={"name": "two", "tool": "issue_refund", "when": "true", "action": "require"}
    )
    request_ = make_gate(args=ARGS)

    answer = stand(client_for(make_user("rita", "reviewer")), request_)

    assert answer.status_code == 403
    assert "2 approvals" in answer.content.decode()
    assert Policy.objects.count() == 1


@pytest.mark.parametrize("order", [100, STANDING_ORDER])  # the API's highest order ties with it
def test_admin_policies_come_before_a_standing_decision(order: int) -> None:
    request_ = make_gate(args=ARGS)
    stand(client_for(make_user("rita", "reviewer")), request_)
    do_create_policy(
        actor=None,
        fields={
            "name": "no big",
            "tool": "issue_refund",
            "when": "args.amount_cents > 10000",
            "action": "deny",
            "order": order,
        },
    )

    assert next_call(request_, {**ARGS, "amount_cents": 20000}).status == ApprovalStatus.REJECTED
    assert next_call(request_).status == ApprovalStatus.APPROVED


def test_the_thread_page_shows_who_made_it_until_when_and_revokes_it() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate(args=ARGS)
    until = timezone.localtime() + timedelta(days=3)
    stand(client_for(rita), request_, until=until.strftime("%Y-%m-%dT%H:%M"))
    standing = Policy.objects.get()
    page_client = client_for(make_user("bob", "reviewer"))

    page = page_client.get(f"/threads/{request_.thread_id}/").content.decode()
    assert f'data-standing-id="{standing.pk}"' in page
    assert "approved for the rest of this thread" in page
    assert "<strong>rita</strong>" in page
    assert "until <time datetime=" in page

    revoked = page_client.post(f"/threads/{request_.thread_id}/standing/{standing.pk}/revoke/")
    assert revoked.status_code == 302
    assert not Policy.objects.exists()
    event = AuditEvent.objects.get(action="policy.delete")
    assert (event.actor_name, event.thread_id) == ("bob", request_.thread_id)
    assert next_call(request_).status == ApprovalStatus.PENDING


def test_revoking_needs_a_reviewer_and_a_standing_decision_of_that_thread() -> None:
    request_ = make_gate(args=ARGS)
    stand(client_for(make_user("rita", "reviewer")), request_)
    standing = Policy.objects.get()
    other = make_gate(args=ARGS)
    admin_policy = do_create_policy(
        actor=None, fields={"name": "all", "tool": "issue_refund", "when": "false", "action": "deny"}
    )
    olga = client_for(make_user("olga", "operator"))
    rita = client_for(make_user("rita2", "reviewer"))

    assert olga.post(f"/threads/{request_.thread_id}/standing/{standing.pk}/revoke/").status_code == 403
    assert rita.post(f"/threads/{other.thread_id}/standing/{standing.pk}/revoke/").status_code == 404
    assert rita.post(f"/threads/{request_.thread_id}/standing/{admin_policy.pk}/revoke/").status_code == 404
    assert rita.get(f"/threads/{request_.thread_id}/standing/{standing.pk}/revoke/").status_code == 405
    assert Policy.objects.count() == 2


def test_a_revoke_that_another_revoke_beat_says_so_instead_of_failing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two reviewers (or a double click) revoke at once: the second finds the standing decision,
    then the first deletes it before the second's delete locks it."""
    from approvals.views import threads as views

    request_ = make_gate(args=ARGS)
    stand(client_for(make_user("rita", "reviewer")), request_)
    standing = Policy.objects.get()
    bob = client_for(make_user("bob", "reviewer"))
    found = views.access_standing

    def found_then_revoked_by_another(**kwargs: Any) -> Policy:
        policy = found(**kwargs)
        Policy.objects.filter(pk=policy.pk).delete()  # the other revoke commits meanwhile
        return policy

    monkeypatch.setattr(views, "access_standing", found_then_revoked_by_another)
    answer = bob.post(f"/threads/{request_.thread_id}/standing/{standing.pk}/revoke/", follow=True)

    assert answer.status_code == 200
    assert "Already revoked" in answer.content.decode()
    assert not AuditEvent.objects.filter(action="policy.delete").exists()  # bob deleted nothing


def test_no_standing_decision_follows_a_decision_that_was_refused() -> None:
    request_ = make_gate(args=ARGS)
    rita, bob = make_user("rita", "reviewer"), make_user("bob", "reviewer")
    client_for(bob).post(f"/approvals/{request_.pk}/claim/", {"op": "claim"})

    answer = stand(client_for(rita), request_)

    assert answer.status_code == 409
    assert not Policy.objects.exists()
    assert ApprovalRequest.objects.get(pk=request_.pk).status == ApprovalStatus.PENDING


def test_undoing_the_approval_leaves_it_an_admin_revokes_it_and_the_api_lists_none(settings: Any) -> None:
    settings.DECISION_UNDO_S = 30
    rita, ada = make_user("rita", "reviewer"), make_user("ada", "admin")
    request_ = make_gate(args=ARGS)
    stand(client_for(rita), request_)
    standing = Policy.objects.get()
    admin_policy = do_create_policy(
        actor=None, fields={"name": "no big", "tool": "issue_refund", "when": "false", "action": "deny"}
    )

    do_undo(request_.pk, user=rita)
    listed = Client(headers={"Authorization": f"Bearer {do_create_token(user=ada)}"}).get("/api/policies")

    assert ApprovalRequest.objects.get(pk=request_.pk).status == ApprovalStatus.PENDING
    assert Policy.objects.filter(pk=standing.pk).exists()  # revoked on the thread page, not by an undo
    assert [p["id"] for p in listed.json()] == [admin_policy.pk]
    revoked = client_for(ada).post(f"/threads/{request_.thread_id}/standing/{standing.pk}/revoke/")
    assert revoked.status_code == 302
    assert not Policy.objects.filter(pk=standing.pk).exists()
    assert AuditEvent.objects.get(action="policy.delete").actor_name == "ada"


def test_a_refused_standing_decision_shows_its_form_as_it_was_sent() -> None:
    request_ = make_gate()

    answer = stand(
        client_for(make_user("rita", "reviewer")), request_, scope="args", until="2020-01-01T10:00"
    )

    page = answer.content.decode()
    assert answer.status_code == 400
    assert 'name="until" value="2020-01-01T10:00"' in page
    assert 'value="args" checked' in page and 'value="tool" checked' not in page
