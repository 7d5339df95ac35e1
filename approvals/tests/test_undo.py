"""The undo window: a decision is stored at once and takes effect (written for the runtime, the
thread resumed) only after DECISION_UNDO_S; inside it, its reviewer can take it back. An undo
and the delayed take-effect serialize on the thread's lock: no gated tool runs on an undone
decision, however close the two come."""

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings

from agents.gates import decisions_at
from approvals.actions.claims import ClaimConflict, do_claim
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.errors import NotAllowed
from approvals.actions.tokens import do_create_token
from approvals.actions.undo import TooLateToUndo, do_take_effect, do_undo
from approvals.models import ApprovalRequest, AuditEvent
from approvals.tasks import take_effect_due_task
from checkpoints.models import Thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def approve(request_: ApprovalRequest, user: User) -> ApprovalRequest:
    return do_decide(request_, reviewer=user, valid=check_decision(request_, user=user, decision="approve"))


def stored_decisions(request_: ApprovalRequest) -> dict[str, Any]:
    return decisions_at(thread_id=request_.thread_id, checkpoint_id=str(request_.checkpoint_id))


def window_ends(request_: ApprovalRequest) -> None:
    ApprovalRequest.objects.filter(pk=request_.pk).update(undo_until=timezone.now() - timedelta(seconds=1))


def test_a_decision_inside_its_window_is_stored_but_not_given_to_the_runtime(
    settings: Settings,
) -> None:
    settings.DECISION_UNDO_S = 30
    rita = make_user("rita", "reviewer")
    request_ = make_gate()

    decided = approve(request_, rita)

    assert decided.status == "approved" and decided.undo_until is not None
    assert stored_decisions(request_) == {}
    assert Thread.objects.get(pk=request_.thread_id).status == "waiting"
    assert do_take_effect(checkpoint_id=str(request_.checkpoint_id)) == 0  # too early


def test_undo_returns_the_request_to_pending_audited_and_the_take_effect_then_does_nothing(
    settings: Settings,
) -> None:
    settings.DECISION_UNDO_S = 30
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    approve(request_, rita)

    undone = do_undo(request_.pk, user=rita)

    assert undone.status == "pending" and undone.decided_by is None and undone.undo_until is None
    assert AuditEvent.objects.filter(action="decision.undo", approval_ref=request_.pk).count() == 1
    window_ends(request_)
    assert do_take_effect(checkpoint_id=str(request_.checkpoint_id)) == 0
    assert stored_decisions(request_) == {}
    assert Thread.objects.get(pk=request_.thread_id).status == "waiting"


def test_after_the_window_the_decision_takes_effect_once_and_can_no_longer_be_undone(
    settings: Settings,
) -> None:
    settings.DECISION_UNDO_S = 30
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    approve(request_, rita)
    window_ends(request_)

    with pytest.raises(TooLateToUndo):
        do_undo(request_.pk, user=rita)
    assert do_take_effect(checkpoint_id=str(request_.checkpoint_id)) == 1
    assert do_take_effect(checkpoint_id=str(request_.checkpoint_id)) == 0

    assert list(stored_decisions(request_)) == [request_.key]
    assert Thread.objects.get(pk=request_.thread_id).status == "running"


def test_the_beat_sweep_lets_decisions_past_their_window_take_effect_when_the_delayed_task_was_lost(
    settings: Settings,
) -> None:
    settings.DECISION_UNDO_S = 30
    rita = make_user("rita", "reviewer")
    past, inside = make_gate(), make_gate()
    approve(past, rita)
    approve(inside, rita)
    window_ends(past)  # its delayed take-effect task never came (lost with Redis)

    assert (
        settings.CELERY_BEAT_SCHEDULE["decisions-take-effect"]["task"]
        == "approvals.tasks.take_effect_due_task"
    )
    assert take_effect_due_task() == 1
    assert take_effect_due_task() == 0  # once

    assert list(stored_decisions(past)) == [past.key] and stored_decisions(inside) == {}
    assert Thread.objects.get(pk=past.thread_id).status == "running"
    assert Thread.objects.get(pk=inside.thread_id).status == "waiting"


def test_only_the_reviewer_who_decided_or_an_admin_may_undo(settings: Settings) -> None:
    settings.DECISION_UNDO_S = 30
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    request_ = make_gate()
    approve(request_, rita)

    with pytest.raises(NotAllowed):
        do_undo(request_.pk, user=sam)
    assert do_undo(request_.pk, user=make_user("ada", "admin")).status == "pending"


def test_a_decision_inside_its_window_is_withdrawn_when_the_thread_moves_on(
    settings: Settings,
) -> None:
    from approvals.actions.threads import do_control

    settings.DECISION_UNDO_S = 30
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    approve(request_, rita)

    do_control(request_.thread_id, user=make_user("olga", "operator"), verb="cancel")

    request_.refresh_from_db()
    assert request_.status == "superseded" and request_.undo_until is None
    assert do_take_effect(checkpoint_id=str(request_.checkpoint_id)) == 0
    assert stored_decisions(request_) == {}


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("attempt", range(8))
def test_an_undo_at_the_last_moment_and_the_take_effect_never_both_win(
    settings: Settings, attempt: int
) -> None:
    settings.DECISION_UNDO_S = 30
    rita = make_user(f"rita{attempt}", "reviewer")
    request_ = make_gate()
    approve(request_, rita)
    # The window ends a moment from now: both race for the thread's lock around that moment.
    ApprovalRequest.objects.filter(pk=request_.pk).update(
        undo_until=timezone.now() + timedelta(milliseconds=30)
    )
    start, outcome = threading.Barrier(2), {}

    def undo() -> None:
        start.wait()
        try:
            do_undo(request_.pk, user=rita)
            outcome["undo"] = True
        except TooLateToUndo:
            outcome["undo"] = False
        finally:
            connection.close()

    def take_effect() -> None:
        start.wait()
        threading.Event().wait(0.03)
        outcome["effect"] = do_take_effect(checkpoint_id=str(request_.checkpoint_id)) > 0
        connection.close()

    workers = [threading.Thread(target=undo), threading.Thread(target=take_effect)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()

    recorded = bool(stored_decisions(request_))
    assert not (outcome["undo"] and outcome["effect"])
    assert recorded == (not outcome["undo"] and outcome["effect"])
    status = ApprovalRequest.objects.get(pk=request_.pk).status
    assert status == ("pending" if outcome["undo"] else "approved")
    assert Thread.objects.get(pk=request_.thread_id).status == ("running" if recorded else "waiting")


def test_the_api_undoes_inside_the_window_and_answers_409_after_it(settings: Settings) -> None:
    settings.DECISION_UNDO_S = 30
    rita = make_user("rita", "reviewer")
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=rita)}"})
    first, second = make_gate(), make_gate()
    approve(first, rita)
    approve(second, rita)

    undone = api.post(f"/api/approvals/{first.pk}/undo")
    window_ends(second)
    too_late = api.post(f"/api/approvals/{second.pk}/undo")

    assert undone.status_code == 200 and undone.json()["status"] == "pending"
    assert stored_decisions(first) == {}
    assert too_late.status_code == 409, too_late.content
    assert ApprovalRequest.objects.get(pk=second.pk).status == "approved"


def test_the_undo_button_is_offered_only_to_who_may_undo_and_a_refusal_to_htmx_says_why_on_the_page(
    settings: Settings,
) -> None:
    settings.DECISION_UNDO_S = 30
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    request_ = make_gate()
    approve(request_, rita)
    pages = {}
    for user in (rita, sam):
        pages[user.username] = Client()
        pages[user.username].force_login(user)

    def offers_undo(name: str) -> bool:
        return "data-undo>" in pages[name].get(f"/approvals/{request_.pk}/").content.decode()

    assert (offers_undo("rita"), offers_undo("sam")) == (True, False)
    # A panel pushed to sam's open page before this change still had the button.
    refused = pages["sam"].post(f"/approvals/{request_.pk}/undo/", headers={"HX-Request": "true"})
    assert (refused.status_code, refused["HX-Redirect"]) == (200, f"/approvals/{request_.pk}/")
    assert (
        "Only the reviewer who decided this"
        in pages["sam"].get(f"/approvals/{request_.pk}/").content.decode()
    )
    assert ApprovalRequest.objects.get(pk=request_.pk).status == "approved"


def test_a_decision_made_through_htmx_leaves_no_message_for_a_later_page(settings: Settings) -> None:
    settings.DECISION_UNDO_S = 0
    page = Client(headers={"HX-Request": "true"})
    page.force_login(make_user("rita", "reviewer"))
    request_ = make_gate()

    assert page.post(f"/approvals/{request_.pk}/", {"decision": "approve"}).status_code == 200

    assert "Decision recorded" not in page.get("/threads/").content.decode()


def test_an_undo_after_the_deadline_passed_gives_the_request_back_its_time_not_an_instant_expiry(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.tools import Expiry
    from approvals.actions.expiry import do_expire_due
    from approvals.tests.helpers import gate_with_expiry

    settings.DECISION_UNDO_S = 30
    rita = make_user("rita", "reviewer")
    request_ = gate_with_expiry(monkeypatch, Expiry(60, "reject"))
    approve(request_, rita)
    # She approved with 20 s left; the deadline passed inside her undo window.
    now = timezone.now()
    ApprovalRequest.objects.filter(pk=request_.pk).update(
        decided_at=now - timedelta(seconds=21), expires_at=now - timedelta(seconds=1)
    )

    do_undo(request_.pk, user=rita)

    assert do_expire_due(now=timezone.now()) == 0  # it was auto-rejected at once
    undone = ApprovalRequest.objects.get(pk=request_.pk)
    assert undone.status == "pending"
    assert undone.expires_at is not None and undone.expires_at > timezone.now() + timedelta(seconds=55)


def test_an_undone_request_stays_claimed_by_the_reviewer_who_undid_it(settings: Settings) -> None:
    settings.DECISION_UNDO_S = 30
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    request_ = make_gate()
    do_claim(request_.pk, user=rita)
    approve(ApprovalRequest.objects.get(pk=request_.pk), rita)

    undone = do_undo(request_.pk, user=rita)

    undone.refresh_from_db()
    assert (undone.status, undone.claimed_by, undone.is_claimed) == ("pending", rita, True)
    assert undone.claimed_at is not None and undone.claim_active_at is not None
    event = AuditEvent.objects.get(action="decision.undo", approval_ref=request_.pk)
    assert event.data["claimed_by"] == "rita"
    with pytest.raises(ClaimConflict):  # mid-decision: not free for another reviewer to grab
        do_claim(request_.pk, user=sam)
