"""Claiming: claim, release, idle expiry, admin reassignment; each audited."""

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from agents.actions import InvalidInput
from approvals.actions.claims import (
    ClaimConflict,
    check_may_claim,
    do_claim,
    do_reassign,
    do_release,
    do_release_idle_claims,
)
from approvals.actions.decisions import NotAllowed, check_decision, do_decide
from approvals.models import ApprovalRequest, AuditEvent
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def claimed_by(request_: ApprovalRequest) -> str | None:
    request_.refresh_from_db()
    return request_.claimed_by.get_username() if request_.claimed_by else None


def test_claim_then_release_is_audited_with_what_the_reviewer_saw() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate()

    do_claim(request_.pk, user=rita)
    assert claimed_by(request_) == "rita"
    do_release(request_.pk, user=rita)

    assert claimed_by(request_) is None
    claim, release = AuditEvent.objects.order_by("id")
    assert (claim.action, claim.actor_name, release.action) == ("claim.take", "rita", "claim.release")
    assert claim.data["args_seen"] == request_.args and claim.data["state_digest"] == request_.state_digest
    assert claim.approval_ref == request_.pk and claim.checkpoint_id == str(request_.checkpoint_id)


def test_a_claim_held_by_someone_else_is_refused_with_their_name() -> None:
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    request_ = make_gate()
    do_claim(request_.pk, user=sam)

    with pytest.raises(ClaimConflict, match=r"Already claimed by sam\."):
        do_claim(request_.pk, user=rita)
    with pytest.raises(NotAllowed, match=r"Only sam or an admin can release this claim\."):
        do_release(request_.pk, user=rita)
    assert claimed_by(request_) == "sam"


def test_claiming_again_refreshes_ones_own_claim_without_a_new_event() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    do_claim(request_.pk, user=rita)
    ApprovalRequest.objects.filter(pk=request_.pk).update(claim_active_at=timezone.now() - timedelta(hours=1))

    do_claim(request_.pk, user=rita)

    request_.refresh_from_db()
    assert request_.claim_active_at is not None
    assert request_.claim_active_at > timezone.now() - timedelta(minutes=1)
    assert AuditEvent.objects.count() == 1


def test_operators_may_not_claim_and_closed_requests_cannot_be_claimed() -> None:
    olga, rita = make_user("olga", "operator"), make_user("rita", "reviewer")
    request_ = make_gate()
    with pytest.raises(NotAllowed):
        check_may_claim(request_, user=olga)

    ApprovalRequest.objects.filter(pk=request_.pk).update(status="superseded", status_reason="edited")
    with pytest.raises(ClaimConflict, match="no longer current: edited"):
        do_claim(request_.pk, user=rita)


@override_settings(CLAIM_IDLE_S=600)
def test_idle_claims_are_released_by_the_sweep_and_audited_as_the_system() -> None:
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    idle, busy = make_gate(), make_gate()
    do_claim(idle.pk, user=rita)
    do_claim(busy.pk, user=sam)
    ApprovalRequest.objects.filter(pk=idle.pk).update(claim_active_at=timezone.now() - timedelta(seconds=601))

    assert do_release_idle_claims() == 1

    assert (claimed_by(idle), claimed_by(busy)) == (None, "sam")
    expired = AuditEvent.objects.get(action="claim.expire")
    assert (expired.actor_name, expired.data["claimed_by"]) == ("system", "rita")


def test_opening_the_decision_page_keeps_ones_claim_alive() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    do_claim(request_.pk, user=rita)
    stale = timezone.now() - timedelta(hours=1)
    ApprovalRequest.objects.filter(pk=request_.pk).update(claim_active_at=stale)
    client = Client()
    client.force_login(rita)

    client.get(f"/approvals/{request_.pk}/")

    request_.refresh_from_db()
    assert request_.claim_active_at is not None and request_.claim_active_at > stale


def test_an_admin_reassigns_to_a_reviewer_who_may_decide_the_queue() -> None:
    ada = make_user("ada", "admin")
    rita = make_user("rita", "reviewer", queues=("refunds",))
    sam = make_user("sam", "reviewer")
    request_ = make_gate()
    do_claim(request_.pk, user=rita)

    with pytest.raises(InvalidInput, match="choose an active reviewer who may decide this queue"):
        do_reassign(request_.pk, admin=ada, to=sam)
    with pytest.raises(NotAllowed, match="Only admins"):
        do_reassign(request_.pk, admin=rita, to=rita)
    do_reassign(request_.pk, admin=ada, to=ada)

    assert claimed_by(request_) == "ada"
    event = AuditEvent.objects.get(action="claim.reassign")
    assert (event.actor_name, event.data["claimed_by"], event.data["to"]) == ("ada", "rita", "ada")


def test_the_claim_endpoint_answers_htmx_with_the_row_and_refuses_bad_ops() -> None:
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    request_ = make_gate()
    client = Client()
    client.force_login(rita)
    url = f"/approvals/{request_.pk}/claim/"
    htmx = {"HX-Request": "true", "HX-Target": f"approval-{request_.pk}"}

    row = client.post(url, {"op": "claim"}, headers=htmx)
    assert row.status_code == 200 and "claimed by you" in row.content.decode()
    assert client.post(url, {"op": "steal"}, headers=htmx).status_code == 400
    client.force_login(sam)
    taken = client.post(url, {"op": "claim"}, headers=htmx)
    assert taken.status_code == 409 and "Already claimed by rita." in taken.content.decode()
    assert claimed_by(request_) == "rita"


def test_the_api_claims_releases_and_reassigns_and_shows_who_holds_a_request() -> None:
    from approvals.actions.tokens import do_create_token

    rita, sam, ada = make_user("rita", "reviewer"), make_user("sam", "reviewer"), make_user("ada", "admin")
    request_ = make_gate()
    url = f"/api/approvals/{request_.pk}/claim"

    def api(user: object) -> Client:
        return Client(headers={"Authorization": f"Bearer {do_create_token(user=user)}"})  # type: ignore[arg-type]

    taken = api(rita).post(url, {"op": "claim"}, content_type="application/json")
    assert (taken.status_code, taken.json()["claimed_by"]) == (200, "rita")
    refused = api(sam).post(url, {"op": "claim"}, content_type="application/json")
    assert (refused.status_code, refused.json()["detail"]) == (409, "Already claimed by rita.")
    assert (
        api(sam).post(url, {"op": "reassign", "to": "sam"}, content_type="application/json").status_code
        == 403
    )
    moved = api(ada).post(url, {"op": "reassign", "to": "sam"}, content_type="application/json")
    assert moved.json()["claimed_by"] == "sam"
    assert api(ada).get("/api/approvals", {"queue": "refunds"}).json()[0]["claimed_by"] == "sam"
    bad = api(ada).post(url, {"op": "reassign", "to": "nobody"}, content_type="application/json")
    assert bad.status_code == 400 and "to" in bad.json()["errors"]


def test_a_reassign_answers_alike_for_an_unknown_user_and_one_who_may_not_decide_the_queue() -> None:
    from approvals.actions.tokens import do_create_token

    ada = make_user("ada", "admin")
    make_user("sam", "reviewer", queues=("outreach",))  # real, but not in refunds' team
    make_user("rita", "reviewer", queues=("refunds",))
    request_ = make_gate()
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=ada)}"})
    page = Client()
    page.force_login(ada)
    url = f"/api/approvals/{request_.pk}/claim"

    def answers(to: str) -> tuple[Any, ...]:
        by_api = api.post(url, {"op": "reassign", "to": to}, content_type="application/json")
        by_page = page.post(
            f"/approvals/{request_.pk}/claim/", {"op": "reassign", "to": to}, headers={"HX-Request": "true"}
        )
        page_text = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", by_page.content.decode())
        return by_api.status_code, by_api.json(), by_page.status_code, page_text

    assert answers("sam") == answers("nobody")
    assert answers("sam")[0] == 400
    assert claimed_by(request_) is None
    moved = page.post(f"/approvals/{request_.pk}/claim/", {"op": "reassign", "to": "rita"})  # the page's form
    assert moved.status_code in (200, 302) and claimed_by(request_) == "rita"


def test_the_api_refuses_unknown_fields_instead_of_ignoring_them() -> None:
    from approvals.actions.tokens import do_create_token

    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=rita)}"})

    for path, body in [
        ("claim", {"op": "claim", "user": "sam"}),
        ("decision", {"decision": "approve", "amount": 1}),
    ]:
        response = api.post(f"/api/approvals/{request_.pk}/{path}", body, content_type="application/json")
        assert response.status_code == 400, path
    assert claimed_by(request_) is None


def test_a_reassign_to_a_reviewer_who_already_approved_a_two_person_request_is_refused() -> None:
    from approvals.actions.tokens import do_create_token

    ada, rita = make_user("ada", "admin"), make_user("rita", "reviewer")
    request_ = make_gate()
    ApprovalRequest.objects.filter(pk=request_.pk).update(required_approvals=2)
    request_.refresh_from_db()
    do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))
    message = "rita already approved this; another reviewer must take it."

    with pytest.raises(ClaimConflict, match=message):
        do_reassign(request_.pk, admin=ada, to=rita)
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=ada)}"})
    by_api = api.post(
        f"/api/approvals/{request_.pk}/claim",
        {"op": "reassign", "to": "rita"},
        content_type="application/json",
    )
    page = Client()
    page.force_login(ada)
    by_page = page.post(
        f"/approvals/{request_.pk}/claim/", {"op": "reassign", "to": "rita"}, headers={"HX-Request": "true"}
    )

    assert (by_api.status_code, by_api.json()["detail"]) == (409, message)
    assert by_page.status_code == 409 and message in by_page.content.decode()
    assert claimed_by(request_) is None
    assert not AuditEvent.objects.filter(action="claim.reassign").exists()
