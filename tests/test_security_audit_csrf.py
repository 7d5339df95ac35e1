"""CSRF on the gate's forms the first sweep (test_security_csrf) does not list: a page of another
site cannot, with a reviewer's cookies, undo a decision, approve a tool for the rest of a thread,
or revoke a standing decision. Each is refused without the token and changes nothing; with it
(the form's field or htmx's header) it goes through."""

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings

from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.standing import check_standing, do_create_standing
from approvals.models import ApprovalRequest, ApprovalStatus, Policy
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def rita() -> User:
    return make_user("rita", "reviewer")


def browser(user: User) -> tuple[Client, str]:
    """A logged-in browser that enforces CSRF as a real one is held to, and its token."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/")  # sets the csrftoken cookie
    return client, str(client.cookies["csrftoken"].value)


def status_of(request_: ApprovalRequest) -> str:
    return str(ApprovalRequest.objects.values_list("status", flat=True).get(pk=request_.pk))


def test_an_undo_needs_the_csrf_token(settings: Settings, rita: User) -> None:
    settings.DECISION_UNDO_S = 60
    gate = make_gate()
    do_decide(gate, reviewer=rita, valid=check_decision(gate, user=rita, decision="approve"))
    client, token = browser(rita)

    assert client.post(f"/approvals/{gate.pk}/undo/").status_code == 403
    assert client.post(f"/approvals/{gate.pk}/undo/", headers={"HX-Request": "true"}).status_code == 403
    assert status_of(gate) == ApprovalStatus.APPROVED

    undone = client.post(f"/approvals/{gate.pk}/undo/", headers={"HX-Request": "true", "X-CSRFToken": token})
    assert undone.status_code == 200 and status_of(gate) == ApprovalStatus.PENDING


def test_a_standing_approval_needs_the_csrf_token(rita: User) -> None:
    gate = make_gate()
    client, token = browser(rita)
    body = {"decision": "approve", "standing": "tool"}

    assert client.post(f"/approvals/{gate.pk}/", body).status_code == 403
    assert client.post(f"/approvals/{gate.pk}/", body, headers={"HX-Request": "true"}).status_code == 403
    assert status_of(gate) == ApprovalStatus.PENDING and not Policy.objects.exists()

    assert client.post(f"/approvals/{gate.pk}/", {**body, "csrfmiddlewaretoken": token}).status_code == 302
    assert status_of(gate) == ApprovalStatus.APPROVED
    assert Policy.objects.get().thread_id == gate.thread_id


def test_revoking_a_standing_decision_needs_the_csrf_token(rita: User) -> None:
    gate = make_gate()
    when = check_standing(gate, user=rita, scope="tool", until=None)
    standing = do_create_standing(gate, reviewer=rita, scope="tool", when=when, until=None)
    client, token = browser(rita)
    path = f"/threads/{gate.thread_id}/standing/{standing.pk}/revoke/"

    assert client.post(path).status_code == 403
    assert client.post(path, headers={"HX-Request": "true"}).status_code == 403
    assert Policy.objects.filter(pk=standing.pk).exists()

    assert client.post(path, {"csrfmiddlewaretoken": token}).status_code == 302
    assert not Policy.objects.filter(pk=standing.pk).exists()
