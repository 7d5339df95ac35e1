"""An admin deletes a thread while a reviewer or operator acts on it, or while beat sweeps it.

Each lost race is a clear 4xx that changes nothing (it was a 500: the action met the thread's
absence as an exception nobody turned into an answer), and the deletion itself never fails
because of the other action (a claim locked only its request row, so its ledger event could
commit beside the deletion and make the deletion an IntegrityError). Beat's sweeps go on past a
thread deleted since they listed it.
"""

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone

from agents.tools import Expiry
from approvals.actions import claims, expiry, undo
from approvals.actions.expiry import do_expire_due
from approvals.actions.threads import do_delete_thread
from approvals.actions.tokens import do_create_token
from approvals.api import approvals as approvals_api
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent
from approvals.tests.helpers import gate_with_expiry
from checkpoints.models import Thread
from tests.at_once import in_thread, waiting_for_a_lock
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def deleted_first(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, *, thread_id: str, admin: User
) -> None:
    """The admin's deletion commits just before `module.name` runs: after the view or task read
    the request, before the action locks anything."""
    real = getattr(module, name)

    def after_the_deletion(*args: Any, **kwargs: Any) -> Any:
        do_delete_thread(thread_id, user=admin)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, after_the_deletion)


def api_client(user: User) -> Client:
    return Client(
        headers={"Authorization": f"Bearer {do_create_token(user=user)}"}, raise_request_exception=False
    )


def page_client(user: User) -> Client:
    page = Client(raise_request_exception=False)
    page.force_login(user)
    return page


def gone(request_: ApprovalRequest) -> bool:
    return (
        not Thread.objects.filter(pk=request_.thread_id).exists()
        and not ApprovalRequest.objects.filter(pk=request_.pk).exists()
    )


@pytest.mark.parametrize("op", ["claim", "release", "reassign"])
def test_a_claim_on_a_thread_deleted_meanwhile_is_a_409_over_the_api(
    monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    ada, rita = make_user("ada", "admin"), make_user("rita", "reviewer")
    request_ = make_gate()
    claims.do_claim(request_.pk, user=rita)
    actor = ada if op == "reassign" else rita
    deleted_first(monkeypatch, approvals_api, "do_claim_op", thread_id=request_.thread_id, admin=ada)

    answer = api_client(actor).post(
        f"/api/approvals/{request_.pk}/claim", {"op": op, "to": "rita"}, content_type="application/json"
    )

    assert answer.status_code == 409, answer.content
    assert answer.json()["detail"] == "This request's thread was deleted; nothing was changed."
    assert gone(request_)


def test_an_undo_on_a_thread_deleted_meanwhile_is_a_409(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.DECISION_UNDO_S = 5
    ada, rita = make_user("ada", "admin"), make_user("rita", "reviewer")
    request_ = make_gate()
    rita_api = api_client(rita)
    decided = rita_api.post(
        f"/api/approvals/{request_.pk}/decision", {"decision": "approve"}, content_type="application/json"
    )
    assert decided.status_code == 200
    deleted_first(monkeypatch, approvals_api, "do_undo", thread_id=request_.thread_id, admin=ada)

    answer = rita_api.post(f"/api/approvals/{request_.pk}/undo")

    assert answer.status_code == 409, answer.content
    assert "deleted" in answer.json()["detail"]
    assert gone(request_)


@pytest.mark.parametrize(
    ("action", "path", "form"),
    [
        ("check_decision", "/approvals/{pk}/", {"decision": "approve"}),
        ("do_claim_op", "/approvals/{pk}/claim/", {"op": "claim"}),
        ("do_undo", "/approvals/{pk}/undo/", {}),
    ],
)
def test_a_page_action_on_a_request_whose_thread_was_deleted_meanwhile_is_no_500(
    monkeypatch: pytest.MonkeyPatch, settings: Any, action: str, path: str, form: dict[str, str]
) -> None:
    from approvals.views import inbox as inbox_views

    settings.DECISION_UNDO_S = 5
    ada, rita = make_user("ada", "admin"), make_user("rita", "reviewer")
    request_ = make_gate()
    page = page_client(rita)
    if action == "do_undo":
        assert page.post(f"/approvals/{request_.pk}/", {"decision": "approve"}).status_code == 302
    deleted_first(monkeypatch, inbox_views, action, thread_id=request_.thread_id, admin=ada)

    answer = page.post(path.format(pk=request_.pk), form, follow=True)

    # The inbox, saying why (a 403 page said it, as if the reviewer had lost the queue).
    assert (answer.status_code, answer.redirect_chain[-1][0]) == (200, "/"), answer.content
    said = [str(m) for m in answer.context["messages"]]
    assert "This request's thread was deleted; nothing was changed." in said
    assert gone(request_)


@pytest.mark.parametrize("verb", ["pause", "cancel"])
def test_an_operators_control_on_a_thread_deleted_meanwhile_is_no_500(
    monkeypatch: pytest.MonkeyPatch, verb: str
) -> None:
    from approvals.views import threads as thread_views

    ada, olga = make_user("ada", "admin"), make_user("olga", "operator")
    request_ = make_gate()
    deleted_first(monkeypatch, thread_views, "do_control", thread_id=request_.thread_id, admin=ada)

    answer = page_client(olga).post(f"/threads/{request_.thread_id}/control/{verb}/")

    assert answer.status_code < 500, answer.content
    assert gone(request_)


def test_the_expiry_sweep_goes_on_past_a_thread_deleted_since_it_listed_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ada = make_user("ada", "admin")
    first = gate_with_expiry(monkeypatch, Expiry(60, "reject"))
    second = gate_with_expiry(monkeypatch, Expiry(60, "reject"))
    deleted_first(monkeypatch, expiry, "lock_request", thread_id=first.thread_id, admin=ada)

    assert do_expire_due(now=timezone.now() + timedelta(seconds=61)) == 1

    second.refresh_from_db()
    assert gone(first)
    assert second.status == ApprovalStatus.EXPIRED


def test_a_delayed_decision_whose_thread_was_deleted_meanwhile_takes_no_effect_quietly(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.DECISION_UNDO_S = 5
    ada, rita = make_user("ada", "admin"), make_user("rita", "reviewer")
    request_ = make_gate()
    assert (
        api_client(rita)
        .post(
            f"/api/approvals/{request_.pk}/decision", {"decision": "approve"}, content_type="application/json"
        )
        .status_code
        == 200
    )
    deleted_first(monkeypatch, undo, "get_backend", thread_id=request_.thread_id, admin=ada)

    assert undo.do_take_effect(checkpoint_id=str(request_.checkpoint_id)) == 0
    assert gone(request_)


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_claim_and_a_deletion_at_the_same_moment_never_fail_the_deletion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The claim holds its locks (its ledger event not yet committed) while the deletion starts;
    the deletion waits for it, then deletes the thread with the claim's event in the ledger."""
    ada, rita = make_user("ada", "admin"), make_user("rita", "reviewer")
    request_ = make_gate()
    inside, go = threading.Event(), threading.Event()
    real_changed = claims._changed

    def held(*args: Any, **kwargs: Any) -> None:
        real_changed(*args, **kwargs)  # the claim's event is written, not committed
        inside.set()
        assert go.wait(10)

    monkeypatch.setattr(claims, "_changed", held)
    claim: dict[str, Any] = {}
    claiming = in_thread(lambda: claims.do_claim(request_.pk, user=rita), claim)
    assert inside.wait(10)
    pid: dict[str, int] = {}

    def delete() -> None:
        connection.ensure_connection()
        pid["pid"] = connection.connection.info.backend_pid
        do_delete_thread(request_.thread_id, user=ada)

    deletion: dict[str, Any] = {}
    deleting = in_thread(delete, deletion)
    deadline = timezone.now() + timedelta(seconds=10)
    while not (pid.get("pid") and waiting_for_a_lock(pid["pid"])):
        assert timezone.now() < deadline, "the deletion never waited for the claim's locks"
        threading.Event().wait(0.02)
    go.set()
    claiming.join(10)
    deleting.join(10)

    assert "error" not in claim, claim
    assert "error" not in deletion, deletion
    assert gone(request_)
    actions = list(
        AuditEvent.objects.filter(thread_id=request_.thread_id)
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions == ["claim.take", "thread.delete"]


def test_a_standing_decision_whose_thread_was_deleted_after_the_approval_is_not_saved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The page approves, then saves the standing decision (two transactions): a deletion
    committed between them took the approval and the thread's standing decisions, and the new
    one was saved after it, for a thread that no longer exists."""
    from approvals.models import Policy
    from approvals.views import inbox as inbox_views

    ada, rita = make_user("ada", "admin"), make_user("rita", "reviewer")
    request_ = make_gate()
    deleted_first(monkeypatch, inbox_views, "do_create_standing", thread_id=request_.thread_id, admin=ada)

    answer = page_client(rita).post(f"/approvals/{request_.pk}/", {"decision": "approve", "standing": "tool"})

    assert answer.status_code < 500, answer.content
    assert gone(request_)
    assert not Policy.objects.filter(thread_id=request_.thread_id).exists()
    assert not AuditEvent.objects.filter(action="policy.create").exists()
