"""Operators steer threads: pause, resume, cancel, edit state, fork, continue — permission-checked,
audited, and never applied halfway."""

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents import runtime
from agents.actions import (
    InvalidInput,
    ThreadStateError,
    check_start_thread,
    do_start_thread,
    replay_warnings,
)
from agents.examples.models import Refund
from agents.registry import registry
from agents.tools import Expiry
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.errors import NotAllowed
from approvals.actions.expiry import do_expire_due
from approvals.actions.threads import do_control, do_edit_state, do_fork_thread
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent
from approvals.tests.helpers import refunds_expire, steps_sent
from approvals.thread_selectors import history
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import Checkpoint, CheckpointSource, Thread, ThreadStatus
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def api(user: object) -> Client:
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=user)}"})  # type: ignore[arg-type]


def head_values(thread_id: str) -> dict:
    return get_backend().get(thread_id=thread_id).values


def edited_values(thread_id: str) -> dict:
    """The head's values with the model's last words changed (the call it proposes stays)."""
    values = head_values(thread_id)
    values["messages"][-1]["content"] = "Refunding the order now."
    return values


def test_pause_and_resume_a_waiting_thread_keeps_its_gate() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()

    assert do_control(request_.thread_id, user=olga, verb="pause").status == ThreadStatus.PAUSED
    assert do_control(request_.thread_id, user=olga, verb="resume").status == ThreadStatus.WAITING
    events = list(AuditEvent.objects.order_by("id"))
    assert [e.action for e in events] == ["thread.pause", "thread.resume"]
    # What the operator saw: the head checkpoint, and its digest.
    head = get_backend().get(thread_id=request_.thread_id)
    assert {(e.checkpoint_id, e.data["state_digest"]) for e in events} == {(head.id, head.digest)}


def test_a_finished_thread_cannot_be_paused_and_says_why() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    do_control(request_.thread_id, user=olga, verb="cancel")

    with pytest.raises(ThreadStateError, match="Cannot pause a thread that is cancelled"):
        do_control(request_.thread_id, user=olga, verb="pause")
    response = api(olga).post(f"/api/threads/{request_.thread_id}/pause")
    assert response.status_code == 409


def test_cancel_supersedes_open_approvals_with_the_reason() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()

    do_control(request_.thread_id, user=olga, verb="cancel")

    request_.refresh_from_db()
    assert request_.status == ApprovalStatus.SUPERSEDED
    assert request_.status_reason == "the thread was cancelled by olga"


def test_a_reviewer_may_not_steer_threads() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate()

    with pytest.raises(NotAllowed):
        do_control(request_.thread_id, user=rita, verb="pause")
    assert api(rita).post(f"/api/threads/{request_.thread_id}/cancel").status_code == 403
    assert (
        api(rita)
        .patch(
            f"/api/threads/{request_.thread_id}/state",
            {"values": {"messages": []}},
            content_type="application/json",
        )
        .status_code
        == 403
    )
    assert Thread.objects.get().status == ThreadStatus.WAITING


def test_editing_state_writes_an_update_checkpoint_and_asks_for_approval_again() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    values = head_values(request_.thread_id)
    call = values["messages"][-1]["tool_calls"][0]
    call["function"]["arguments"] = json.dumps({"order_id": "ORD-1001", "amount_cents": 100})

    written = do_edit_state(request_.thread_id, user=olga, values=values)

    assert written.checkpoint.source == "update"
    assert written.checkpoint.parent_id == str(request_.checkpoint_id)
    request_.refresh_from_db()
    assert request_.status == ApprovalStatus.SUPERSEDED
    fresh = ApprovalRequest.objects.get(status=ApprovalStatus.PENDING)
    assert str(fresh.checkpoint_id) == written.checkpoint.id
    assert fresh.args == {"order_id": "ORD-1001", "amount_cents": 100}
    event = AuditEvent.objects.get(action="thread.update")
    seen = get_backend().get(thread_id=request_.thread_id, checkpoint_id=str(request_.checkpoint_id))
    assert (event.data["seen_digest"], event.data["state_digest"]) == (seen.digest, written.checkpoint.digest)
    # The ledger names the argument the operator changed, not the whole arguments text.
    [change] = event.data["changes"]
    assert change["path"] == "messages[1].tool_calls[0].function.arguments.amount_cents"
    assert change["new"] == 100


def test_a_gate_asked_again_points_at_the_request_it_replaces_and_keeps_its_place() -> None:
    olga = make_user("olga", "operator")
    first = make_gate()
    later = make_gate()  # another thread's, asked after the first

    def edit_amount(cents: int) -> ApprovalRequest:
        values = head_values(first.thread_id)
        call = values["messages"][-1]["tool_calls"][0]
        call["function"]["arguments"] = json.dumps({"order_id": "ORD-1001", "amount_cents": cents})
        do_edit_state(first.thread_id, user=olga, values=values)
        return ApprovalRequest.objects.get(thread_id=first.thread_id, status=ApprovalStatus.PENDING)

    second = edit_amount(100)
    third = edit_amount(200)

    # Each points at the one it replaced, not at an older one already asked again.
    assert (second.supersedes_id, third.supersedes_id) == (first.pk, second.pk)
    assert third.created_at == second.created_at == first.created_at < later.created_at
    pending = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING)
    assert [r.pk for r in pending] == [third.pk, later.pk]  # oldest first: the first's place

    # A gate asked for the first time looks for its original once and writes nothing more
    # than its row (the factory then reads the request it made).
    with CaptureQueriesContext(connection) as queries:
        make_gate()
    table = ApprovalRequest._meta.db_table
    on_requests = [q["sql"].split()[0] for q in queries.captured_queries if table in q["sql"]]
    assert sorted(on_requests) == ["INSERT", "SELECT", "SELECT"]


def test_a_fork_that_asks_a_pending_gate_again_points_at_it_and_keeps_its_place() -> None:
    olga = make_user("olga", "operator")
    first = make_gate()
    later = make_gate()

    do_fork_thread(first.thread_id, user=olga, checkpoint_id=str(first.checkpoint_id), values=None)

    again = ApprovalRequest.objects.get(thread_id=first.thread_id, status=ApprovalStatus.PENDING)
    assert (again.key, again.supersedes_id) == (first.key, first.pk)
    assert again.created_at == first.created_at < later.created_at


@pytest.mark.parametrize("how", ["edit", "fork"])
def test_a_gate_asked_again_after_its_request_escalated_stays_escalated(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    olga = make_user("olga", "operator")
    refunds_expire(monkeypatch, Expiry(900, "escalate", to_queue="supervisors"))
    first = make_gate()
    assert do_expire_due(now=timezone.now() + timedelta(seconds=901)) == 1

    if how == "edit":
        values = head_values(first.thread_id)
        values["messages"][-1]["content"] = "Refunding the order in full."
        do_edit_state(first.thread_id, user=olga, values=values)
    else:
        do_fork_thread(first.thread_id, user=olga, checkpoint_id=str(first.checkpoint_id), values=None)

    again = ApprovalRequest.objects.get(thread_id=first.thread_id, status=ApprovalStatus.PENDING)
    assert again.supersedes_id == first.pk
    # Still with the supervisors, marked as escalated, not timed again for the refunds team.
    assert (again.queue, again.escalated_from, again.expires_at) == ("supervisors", "refunds", None)
    assert again.status_reason == "Nobody decided within 15 minutes."


def test_an_invalid_state_edit_is_refused_with_field_errors_and_changes_nothing() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    before = Checkpoint.objects.count()

    with pytest.raises(InvalidInput) as error:
        do_edit_state(request_.thread_id, user=olga, values={"messages": "not a list", "extra": 1})

    assert set(error.value.errors) == {"messages", "extra"}
    assert Checkpoint.objects.count() == before
    assert status_of(request_) == ApprovalStatus.PENDING


def status_of(request_: ApprovalRequest) -> str:
    request_.refresh_from_db()
    return request_.status


def test_bad_json_and_oversized_state_get_clear_400s_over_the_api(settings: object) -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    client = api(olga)

    bad_json = client.patch(
        f"/api/threads/{request_.thread_id}/state", "{nope", content_type="application/json"
    )
    settings.MAX_STATE_BYTES = 100  # type: ignore[attr-defined]
    too_big = client.patch(
        f"/api/threads/{request_.thread_id}/state",
        {"values": {"messages": [{"role": "user", "content": "x" * 200}]}},
        content_type="application/json",
    )

    assert bad_json.status_code == 400
    assert too_big.status_code == 400
    assert "limit is 100" in too_big.json()["errors"]["values"]
    assert Checkpoint.objects.filter(source="update").count() == 0


def test_fork_from_an_earlier_checkpoint_moves_the_head_and_keeps_the_old_branch() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    thread = Thread.objects.get()
    first = Checkpoint.objects.get(step=0)
    edited = {"messages": [{"id": "m1", "role": "user", "content": "Please refund order ORD-1003"}]}

    written = do_fork_thread(thread.pk, user=olga, checkpoint_id=str(first.pk), values=edited)

    thread.refresh_from_db()
    assert str(thread.head_id) == written.checkpoint.id
    assert (written.checkpoint.source, written.checkpoint.parent_id, written.checkpoint.step) == (
        "fork",
        str(first.pk),
        1,
    )
    assert thread.status == ThreadStatus.RUNNING
    [root] = history(thread)
    assert [c.step for c in root.checkpoints] == [0, 1]  # the current line: input, then the fork
    assert [c.step for c in root.branches[0].checkpoints] == [1]  # the old branch: the gate
    assert not root.branches[0].current
    assert status_of(request_) == ApprovalStatus.SUPERSEDED
    # The ledger keeps the digest of what the operator forked from, not only of the head before.
    event = AuditEvent.objects.get(action="thread.fork")
    origin = get_backend().get(thread_id=thread.pk, checkpoint_id=str(first.pk))
    assert (event.data["seen_digest"], event.data["previous_head"]) == (
        origin.digest,
        str(request_.checkpoint_id),
    )


def test_an_operators_fork_and_resume_send_the_step_ahead_of_new_threads(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    first = Checkpoint.objects.get(step=0)
    sent = steps_sent(monkeypatch)

    with django_capture_on_commit_callbacks(execute=True):
        fork = do_fork_thread(request_.thread_id, user=olga, checkpoint_id=str(first.pk), values=None)
    with django_capture_on_commit_callbacks(execute=True):
        do_control(request_.thread_id, user=olga, verb="pause")
    with django_capture_on_commit_callbacks(execute=True):
        do_control(request_.thread_id, user=olga, verb="resume")

    # On RESUME_QUEUE (by_person), like a reviewer's decision: a person is waiting to see it run.
    assert sent == [(fork.checkpoint.id, True), (fork.checkpoint.id, True)]


def test_fork_warns_which_side_effecting_tools_ran_after_the_checkpoint() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    values = head_values(request_.thread_id)
    call_id = values["messages"][-1]["tool_calls"][0]["id"]
    values["messages"].append(
        {"id": "m9", "role": "tool", "tool_call_id": call_id, "content": '{"status": "issued"}'}
    )
    do_edit_state(request_.thread_id, user=olga, values=values)

    warnings = replay_warnings(request_.thread_id, checkpoint_id=str(request_.checkpoint_id))

    assert [w["tool"] for w in warnings] == ["issue_refund"]


def approved_step_with(
    monkeypatch: pytest.MonkeyPatch, *, settings: Any, meanwhile: Callable[[str, str], Any]
) -> tuple[str, str, runtime.StepOutcome]:
    """Run the step after an approved refund; `meanwhile(thread_id, gate checkpoint id)` lands
    after its tool ran (the refund and its result committed) and before the step's checkpoint."""
    settings.DECISION_UNDO_S = 0
    steps_sent(monkeypatch)
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))
    thread_id, gate = request_.thread_id, str(request_.checkpoint_id)
    agent = registry.get("refunds")
    tools = agent.nodes["tools"]

    def then_operator(state: Any, ctx: Any) -> Any:
        step = tools(state, ctx)
        meanwhile(thread_id, gate)
        return step

    monkeypatch.setitem(agent.nodes, "tools", then_operator)
    outcome = runtime.run_step(thread_id=thread_id, checkpoint_id=gate, worker="w1")
    return thread_id, gate, outcome


def cancel(thread_id: str, gate: str) -> None:
    do_control(thread_id, user=make_user("olga", "operator"), verb="cancel")


def pause_and_edit(thread_id: str, gate: str) -> None:
    olga = make_user("olga", "operator")
    do_control(thread_id, user=olga, verb="pause")
    do_edit_state(thread_id, user=olga, values=edited_values(thread_id))


def fork_from_the_gate(thread_id: str, gate: str) -> None:
    do_fork_thread(thread_id, user=make_user("olga", "operator"), checkpoint_id=gate, values=None)


@pytest.mark.parametrize("meanwhile", [cancel, pause_and_edit, fork_from_the_gate])
def test_fork_warns_of_a_refund_that_ran_though_its_step_wrote_no_checkpoint(
    monkeypatch: pytest.MonkeyPatch, settings: Any, meanwhile: Callable[[str, str], Any]
) -> None:
    thread_id, gate, outcome = approved_step_with(monkeypatch, settings=settings, meanwhile=meanwhile)
    first = str(Checkpoint.objects.get(thread_id=thread_id, step=0).pk)

    assert outcome.kind == "stale" and Refund.objects.count() == 1  # done, yet in no state
    for origin in (first, gate):
        warnings = replay_warnings(thread_id, checkpoint_id=origin)
        assert [(w["tool"], w["arguments"]["order_id"]) for w in warnings] == [("issue_refund", "ORD-1001")]


def test_fork_warns_once_of_a_refund_whose_step_wrote_its_checkpoint(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    thread_id, gate, outcome = approved_step_with(monkeypatch, settings=settings, meanwhile=lambda *_: None)

    assert outcome.kind == "stepped"
    assert [w["tool"] for w in replay_warnings(thread_id, checkpoint_id=gate)] == ["issue_refund"]
    assert replay_warnings(thread_id, checkpoint_id=outcome.checkpoint_id or "") == []


def test_the_api_lists_history_and_diffs_two_checkpoints() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    client = api(olga)
    thread_id = request_.thread_id

    steps = client.get(f"/api/threads/{thread_id}/history").json()
    first = steps[-1]["id"]
    diff = client.get(f"/api/threads/{thread_id}/diff", {"from": first, "to": steps[0]["id"]}).json()
    one = client.get(f"/api/threads/{thread_id}/checkpoints/{first}").json()

    assert [s["step"] for s in steps] == [1, 0]
    assert [(c["kind"], c["path"]) for c in diff] == [("added", "messages[1]")]
    assert diff[0]["new"]["tool_calls"][0]["function"]["name"] == "issue_refund"
    assert one["values"]["messages"][0]["content"] == "Please refund order ORD-1001"
    assert client.get(f"/api/threads/{thread_id}/checkpoints/not-a-checkpoint").status_code == 404


def test_the_api_pages_history_with_limit_and_before() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    do_edit_state(request_.thread_id, user=olga, values=edited_values(request_.thread_id))
    client = api(olga)
    url = f"/api/threads/{request_.thread_id}/history"
    every = [c["id"] for c in client.get(url).json()]

    first = [c["id"] for c in client.get(url, {"limit": 2}).json()]
    rest = [c["id"] for c in client.get(url, {"limit": 2, "before": first[-1]}).json()]

    assert len(every) == 3 and first + rest == every
    assert client.get(url, {"before": every[-1]}).json() == []
    assert client.get(url, {"before": "not-a-checkpoint"}).status_code == 404
    assert client.get(url, {"limit": "many"}).status_code == 400


def test_a_history_page_holds_at_most_the_limit_and_at_least_one(monkeypatch: pytest.MonkeyPatch) -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    do_edit_state(request_.thread_id, user=olga, values=edited_values(request_.thread_id))
    monkeypatch.setattr("approvals.thread_selectors.HISTORY_LIMIT", 2)  # 1,000 in earnest
    url = f"/api/threads/{request_.thread_id}/history"

    assert len(api(olga).get(url, {"limit": 5000}).json()) == 2
    assert len(api(olga).get(url, {"limit": 0}).json()) == 1


def test_the_thread_list_filters_by_agent_status_and_text() -> None:
    olga = make_user("olga", "operator")
    make_gate()
    email = make_gate(
        agent="outreach", action="send_email", args={"to": "bob@example.com", "subject": "Hi", "body": "Yo"}
    )
    client = api(olga)

    by_id = client.get("/api/threads", {"q": email.thread_id[-6:].upper()}).json()
    assert [t["id"] for t in by_id] == [email.thread_id]

    assert [t["agent"] for t in client.get("/api/threads", {"agent": "outreach"}).json()] == ["outreach"]
    assert len(client.get("/api/threads", {"status": "waiting"}).json()) == 2
    assert len(client.get("/api/threads", {"q": "ORD-1001"}).json()) == 2
    assert len(client.get("/api/threads", {"q": "refund ord-1001"}).json()) == 2  # words, any order
    assert client.get("/api/threads", {"q": "refund bob@example.com"}).json() == []
    assert client.get("/api/threads", {"q": "no such text"}).json() == []
    unknown = client.get("/api/threads", {"status": "bogus"})  # not "no threads": a typo is said
    assert unknown.status_code == 400 and "status" in unknown.content.decode()
    assert len(client.get("/api/threads", {"status": ""}).json()) == 2  # blank: any status, as before


def test_the_thread_search_matches_a_messages_values_never_its_field_names() -> None:
    olga = make_user("olga", "operator")
    refund = make_gate(model_text="Checking the parcel first")
    client = api(olga)

    def found(q: str) -> list[str]:
        return [t["id"] for t in client.get("/api/threads", {"q": q}).json()]

    for field_name in ("content", "role", "tool_calls", "arguments"):
        assert found(field_name) == [], field_name
    assert found("parcel") == [refund.thread_id]
    assert found("issue_refund") == [refund.thread_id]  # a tool's name is a value
    assert found("assistant parcel") == [refund.thread_id]  # every word in one message


@pytest.mark.postgres_only
def test_the_thread_search_takes_web_search_syntax_on_postgres() -> None:
    refund = make_gate(model_text="Checking the parcel first")
    client = api(make_user("olga", "operator"))

    def found(q: str) -> list[str]:
        return [t["id"] for t in client.get("/api/threads", {"q": q}).json()]

    assert found('"checking the parcel"') == [refund.thread_id]
    assert found('"parcel checking"') == []  # a phrase keeps its order
    assert found("parcel or nowhere") == [refund.thread_id]
    assert found("parcel -checking") == []
    # Postgres nests a NOT per dash and refused 33 of them (a 500): a run reads as one dash.
    assert found("parcel " + "-" * 40 + "checking") == []
    assert found("parcel " + "- ! " * 40 + "nowhere") == [refund.thread_id]
    assert found("-" * 40) == found("- " * 40) == []
    page = Client()
    page.force_login(make_user("oscar", "operator"))
    assert page.get("/threads/", {"q": "-" * 40}).status_code == 200


def test_encrypted_messages_cannot_be_searched_but_thread_ids_still_match(settings: Any) -> None:
    settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()
    refund = make_gate(model_text="Checking the parcel first")
    client = api(make_user("olga", "operator"))

    assert client.get("/api/threads", {"q": "parcel"}).json() == []
    by_id = client.get("/api/threads", {"q": refund.thread_id[-8:]}).json()
    assert [t["id"] for t in by_id] == [refund.thread_id]


@pytest.mark.postgres_only
def test_a_message_postgres_cannot_read_as_json_is_written_and_searched_by_its_text() -> None:
    # jsonb has no \u0000: the search index falls back to the item's text, never failing a write.
    request_ = make_gate(model_text="A parcel\x00 that arrived damaged")
    found = api(make_user("olga", "operator")).get("/api/threads", {"q": "damaged"}).json()
    assert [t["id"] for t in found] == [request_.thread_id]


def test_the_thread_list_filters_by_dates_and_decider_and_pages_newest_activity_first() -> None:
    olga, rita = make_user("olga", "operator"), make_user("rita", "reviewer")
    old, decided, quiet = make_gate(), make_gate(), make_gate()
    do_decide(decided, reviewer=rita, valid=check_decision(decided, user=rita, decision="approve"))
    now = timezone.now()
    Thread.objects.filter(pk=old.thread_id).update(created_at=now - timedelta(days=3))
    for minutes, request_ in enumerate([quiet, decided, old]):  # quiet moved last: newest activity
        Thread.objects.filter(pk=request_.thread_id).update(updated_at=now - timedelta(minutes=minutes))
    client = api(olga)

    def ids(**params: str | int) -> list[str]:
        return [t["id"] for t in client.get("/api/threads", params).json()]

    everyone = [quiet.thread_id, decided.thread_id, old.thread_id]
    assert ids() == everyone
    assert ids(limit=2) == everyone[:2] and ids(limit=2, offset=2) == everyone[2:]
    two_days_ago = (timezone.localdate() - timedelta(days=2)).isoformat()
    assert ids(created_after=two_days_ago) == everyone[:2]
    assert ids(created_before=two_days_ago) == [old.thread_id]
    assert ids(decided_by="rita") == [decided.thread_id]
    assert ids(decided_by="olga") == []
    web = Client()
    web.force_login(olga)
    page = web.get("/threads/", {"created_before": two_days_ago}).content.decode()  # the page's range too
    assert old.thread_id in page and quiet.thread_id not in page and decided.thread_id not in page


def test_the_first_and_last_days_a_date_can_name_filter_without_an_error() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    web = Client()
    web.force_login(olga)
    ends = {"created_after": "0001-01-01", "created_before": "9999-12-31"}  # no day after the last

    assert [t["id"] for t in api(olga).get("/api/threads", ends).json()] == [request_.thread_id]
    page = web.get("/threads/", ends)
    assert page.status_code == 200 and request_.thread_id in page.content.decode()


def test_an_invalid_filter_on_the_thread_list_is_dropped_and_said_the_others_still_apply() -> None:
    olga = make_user("olga", "operator")
    waiting = make_gate()
    done = make_gate(
        agent="outreach", action="send_email", args={"to": "b@example.com", "subject": "Hi", "body": "Yo"}
    )
    Thread.objects.filter(pk=done.thread_id).update(status=ThreadStatus.DONE)
    web = Client()
    web.force_login(olga)

    for bad in ({"created_after": "notadate"}, {"q": "x" * 201}):
        page = web.get("/threads/", {"status": "waiting", **bad}).content.decode()
        assert waiting.thread_id in page and done.thread_id not in page, bad  # status still applies
        assert "field-error" in page, bad  # and the bad one is said


def test_starting_a_thread_under_a_taken_id_is_a_409_that_leaves_it_alone() -> None:
    taken = make_gate()
    before = Thread.objects.get(pk=taken.thread_id).head_id
    start = {"agent": "refunds", "input": "Refund ORD-1002 instead", "thread_id": taken.thread_id}

    answer = api(make_user("olga", "operator")).post("/api/threads", start, content_type="application/json")

    assert answer.status_code == 409 and taken.thread_id in answer.json()["detail"]
    assert Thread.objects.get(pk=taken.thread_id).head_id == before


def test_a_reviewer_reads_only_threads_in_their_queues() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    client = api(rita)

    assert client.get(f"/api/threads/{request_.thread_id}").status_code == 200
    assert [t["id"] for t in client.get("/api/threads").json()] == [request_.thread_id]


@pytest.mark.parametrize(
    ("verb", "said"),
    [
        ("pause", "Thread paused between steps."),
        ("resume", "Thread resumed."),
        ("cancel", "Thread cancelled."),
    ],
)
def test_the_thread_page_says_what_the_operator_did_in_words(verb: str, said: str) -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    client = Client()
    client.force_login(olga)
    if verb == "resume":
        do_control(request_.thread_id, user=olga, verb="pause")

    response = client.post(f"/threads/{request_.thread_id}/control/{verb}/", follow=True)

    assert [str(m) for m in response.context["messages"]] == [said]


def test_the_notes_on_edits_come_from_the_ledger_at_a_cost_that_does_not_grow_with_them() -> None:
    olga = make_user("olga", "operator")
    thread_id = make_gate().thread_id
    client = Client()
    client.force_login(olga)

    def edit(amount: int) -> None:
        values = head_values(thread_id)
        call = values["messages"][-1]["tool_calls"][0]
        call["function"]["arguments"] = json.dumps({"order_id": "ORD-1001", "amount_cents": amount})
        do_edit_state(thread_id, user=olga, values=values)

    def page_queries() -> tuple[int, list[str]]:
        with CaptureQueriesContext(connection) as queries:
            response = client.get(f"/threads/{thread_id}/")
        assert response.status_code == 200
        return len(queries), list(response.context["notes"].values())

    edit(100)
    edit(200)
    few, notes = page_queries()
    for amount in range(300, 1500, 100):
        edit(amount)
    many, more_notes = page_queries()

    # the argument that changed, not the arguments' text
    assert (
        notes[0]
        == "state edited by olga: messages[1].tool_calls[0].function.arguments.amount_cents 100 → 200"
    )
    assert (len(notes), len(more_notes)) == (2, 14)
    assert many == few  # a note cost two checkpoint loads: the page took 20 queries with 2 edits, 80 with 14


def test_starting_a_thread_answers_with_the_thread_as_reading_it_back_does() -> None:
    client = api(make_user("olga", "operator"))

    created = client.post(
        "/api/threads",
        {"agent": "refunds", "input": "Please refund order ORD-1001"},
        content_type="application/json",
    )

    assert created.status_code == 201, created.content
    thread = created.json()
    assert thread["values"]["messages"][-1]["content"] == "Please refund order ORD-1001"
    assert (thread["status"], thread["pending_approvals"]) == ("running", [])
    # Built from what was written, not read back: the same answer a read gives.
    assert thread == client.get(f"/api/threads/{thread['id']}").json()


def test_a_tools_result_reads_as_its_fields_like_a_calls_arguments() -> None:
    from approvals.conversation import conversation

    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": '{"order_id": "A"}'},
    }
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": '{"customer": "Ada Lovelace", "total_cents": 4250}',
        },
        {"role": "tool", "tool_call_id": "c1", "content": "no such order"},
        {"role": "user", "content": '{"typed": "as JSON"}'},
    ]

    items = conversation({"messages": messages})

    assert (items[1].tool_name, items[1].result) == (
        "lookup_order",
        "customer: Ada Lovelace\ntotal_cents: 4250",
    )
    assert (items[2].result, items[2].content) == ("", "no such order")  # text stays as written
    assert items[3].result == ""  # a person's message is never reformatted


def test_the_thread_page_shows_a_tools_result_as_its_fields() -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": '{"order_id": "A"}'},
    }
    result = {
        "role": "tool",
        "tool_call_id": "c1",
        "content": '{"customer": "Ada Lovelace", "total_cents": 4250}',
    }
    get_backend().create_thread(
        thread_id="with-a-result",
        agent="refunds",
        first=NewCheckpoint(
            values={"messages": [{"role": "assistant", "content": None, "tool_calls": [call]}, result]},
            source=CheckpointSource.INPUT,
        ),
        status=ThreadStatus.DONE,
    )
    client = Client()
    client.force_login(make_user("olga", "operator"))

    page = client.get("/threads/with-a-result/").content.decode()

    assert "customer: Ada Lovelace\ntotal_cents: 4250" in page
    assert "&quot;customer&quot;" not in page  # not the raw JSON text


@pytest.mark.parametrize("offline", [True, False])
def test_a_thread_run_on_the_offline_model_is_labelled_so_on_its_page(settings: Any, offline: bool) -> None:
    settings.OFFLINE_MODEL = offline
    agent = check_start_thread(agent="refunds", text="Please refund order ORD-1001", thread_id=None)
    thread, _ = do_start_thread(
        agent=agent, text="Please refund order ORD-1001", thread_id=None, actor="user:olga"
    )
    client = Client()
    client.force_login(make_user("olga", "operator"))

    page = client.get(f"/threads/{thread.id}/").content.decode()

    assert ('<span class="tag offline"' in page) is offline
    assert api(make_user("ada", "admin")).get(f"/api/threads/{thread.id}").json()["offline_model"] is offline
