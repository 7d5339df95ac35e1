"""Deciding approval requests: who may, what is valid, and what happens when it is too late."""

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agents.actions import InvalidInput
from approvals.actions.audit import event_body, event_hash
from approvals.actions.claims import do_claim
from approvals.actions.decisions import DecisionConflict, NotAllowed, check_decision, do_decide
from approvals.actions.tokens import do_create_token, do_revoke_token
from approvals.models import ApiToken, ApprovalRequest, ApprovalStatus, AuditEvent
from approvals.tests.helpers import ledger_written_last
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import CheckpointSource, Thread, ThreadStatus
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def api(token: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {token}"})


def test_a_decision_writes_its_request_once_and_pushes_without_reading_it_back(
    settings: Any, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.DECISION_UNDO_S = 5
    pushed: list[dict[str, Any]] = []
    monkeypatch.setattr("approvals.events._send", lambda group, message: pushed.append(message))
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    valid = check_decision(request_, user=rita, decision="approve")

    with CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks(execute=True):
        do_decide(request_, reviewer=rita, valid=valid)

    table = ApprovalRequest._meta.db_table
    writes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith(f'UPDATE "{table}"')]
    assert len(writes) == 1 and '"undo_until"' in writes[0]  # the window's end goes with the decision
    reads = [
        q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT") and table in q["sql"]
    ]
    assert len(reads) == 1  # only the locking read: the push used the row in hand
    assert {"type": "approval.closed", "request_id": request_.pk} in pushed
    assert any(m["type"] == "inbox.changed" and m["queues"] == [request_.queue] for m in pushed)


def test_a_decision_appends_to_the_ledger_last_so_the_ledgers_lock_is_held_only_to_the_commit(
    settings: Any,
) -> None:
    settings.DECISION_UNDO_S = 0  # it takes effect at once: recorded, and the thread resumed
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    valid = check_decision(request_, user=rita, decision="approve")

    with ledger_written_last():
        do_decide(request_, reviewer=rita, valid=valid)

    assert Thread.objects.get(pk=request_.thread_id).status == ThreadStatus.RUNNING
    assert AuditEvent.objects.filter(approval=request_, action="decision.approve").count() == 1


def test_approve_records_the_decision_and_sets_the_thread_running() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate()

    do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))

    request_.refresh_from_db()
    assert (request_.status, request_.decided_by) == (ApprovalStatus.APPROVED, rita)
    assert Thread.objects.get(pk=request_.thread_id).status == ThreadStatus.RUNNING


def test_an_operator_may_not_decide() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()

    with pytest.raises(NotAllowed):
        check_decision(request_, user=olga, decision="approve")
    response = api(do_create_token(user=olga)).post(
        f"/api/approvals/{request_.pk}/decision", {"decision": "approve"}, content_type="application/json"
    )

    assert response.status_code == 403
    assert status_of(request_) == ApprovalStatus.PENDING


def status_of(request_: ApprovalRequest) -> str:
    request_.refresh_from_db()
    return request_.status


def test_reject_needs_a_reason_and_changes_nothing_without_one() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate()

    with pytest.raises(InvalidInput) as error:
        check_decision(request_, user=rita, decision="reject", message="  ")

    assert error.value.errors == {"message": "write a reason for the agent"}
    assert status_of(request_) == ApprovalStatus.PENDING


def test_a_decision_the_gate_does_not_allow_is_refused() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate(
        agent="outreach",
        action="send_email",
        args={"to": "bob@example.com", "subject": "Hi", "body": "Hello"},
    )

    with pytest.raises(InvalidInput) as error:
        check_decision(request_, user=rita, decision="respond", message="no")

    assert "approve, edit, reject" in error.value.errors["decision"]


def test_an_edit_with_unknown_fields_or_wrong_types_lists_each_field() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate()

    with pytest.raises(InvalidInput) as error:
        check_decision(
            request_,
            user=rita,
            decision="edit",
            args={"order_id": "ORD-1001", "amount_cents": "lots", "note": "x"},
        )

    assert set(error.value.errors) == {"args.amount_cents", "args.note"}


@pytest.mark.parametrize("claimed_by_another", [False, True])
def test_a_request_whose_thread_moved_on_is_superseded_and_refused_with_the_reason(
    claimed_by_another: bool,
) -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    if claimed_by_another:  # the claim's conflict must not roll the supersede back
        do_claim(request_.pk, user=make_user("sam", "reviewer"))
    backend = get_backend()
    head = backend.get(thread_id=request_.thread_id)
    backend.put(
        thread_id=head.thread_id,
        parent_id=head.id,
        expected_head=head.id,
        status=ThreadStatus.PAUSED,
        checkpoint=NewCheckpoint(values=head.values, source=CheckpointSource.UPDATE, next=head.next),
    )

    with pytest.raises(DecisionConflict) as error:
        do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))

    assert "no longer current" in str(error.value)
    assert status_of(request_) == ApprovalStatus.SUPERSEDED


@pytest.mark.parametrize(
    ("body", "form"),
    [
        ({"decision": "edit", "args": {"order_id": "ORD-1001", "amount_cents": 0}}, None),
        ({"decision": "reject"}, {"decision": "reject"}),
        ({"decision": "respond", "message": "x" * 20_000}, {"decision": "respond", "message": "x" * 20_000}),
    ],
)
@pytest.mark.parametrize("why", ["decided", "superseded", "claimed"])
def test_a_decision_on_a_request_no_one_may_decide_now_says_so_before_any_mistake_in_it(
    why: str, body: dict[str, Any], form: dict[str, str] | None
) -> None:
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    request_ = make_gate()
    if why == "decided":
        do_decide(request_, reviewer=sam, valid=check_decision(request_, user=sam, decision="approve"))
    elif why == "superseded":
        ApprovalRequest.objects.filter(pk=request_.pk).update(
            status=ApprovalStatus.SUPERSEDED, status_reason="olga edited the state"
        )
    else:
        do_claim(request_.pk, user=sam)
    said = {
        "decided": "Already approved by sam.",
        "superseded": "no longer current: olga edited the state",
        "claimed": "Claimed by sam",
    }[why]
    before = ApprovalRequest.objects.filter(pk=request_.pk).values().get()

    answer = api(do_create_token(user=rita)).post(
        f"/api/approvals/{request_.pk}/decision", body, content_type="application/json"
    )
    assert (answer.status_code, said in answer.json()["detail"]) == (409, True)
    if form is not None:
        page = Client()
        page.force_login(rita)
        answer = page.post(f"/approvals/{request_.pk}/", form)
        assert (answer.status_code, said in answer.content.decode()) == (409, True)
    assert ApprovalRequest.objects.filter(pk=request_.pk).values().get() == before


def test_every_decision_is_audited_in_a_hash_chain() -> None:
    rita = make_user("rita", "reviewer")
    first, second = make_gate(), make_gate()

    do_decide(first, reviewer=rita, valid=check_decision(first, user=rita, decision="approve"))
    do_decide(second, reviewer=rita, valid=check_decision(second, user=rita, decision="reject", message="no"))

    one, two = AuditEvent.objects.order_by("id")
    assert (one.action, two.action) == ("decision.approve", "decision.reject")
    assert two.prev_hash == one.hash
    assert all(e.hash == event_hash(prev_hash=e.prev_hash, body=event_body(e)) for e in (one, two))
    assert one.data["args_seen"] == {"order_id": "ORD-1001", "amount_cents": 4250}


def test_the_api_refuses_missing_and_revoked_tokens() -> None:
    rita = make_user("rita", "reviewer")
    raw = do_create_token(user=rita)

    assert Client().get("/api/approvals").status_code == 401
    assert api(raw).get("/api/approvals").status_code == 200
    do_revoke_token(ApiToken.objects.get())
    assert api(raw).get("/api/approvals").status_code == 401
    assert ApiToken.objects.get().token_hash != raw  # only the hash is stored


def test_a_malformed_decision_body_is_a_clear_400() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate()

    response = api(do_create_token(user=rita)).post(
        f"/api/approvals/{request_.pk}/decision", {"decision": "maybe"}, content_type="application/json"
    )

    assert response.status_code == 400
    assert "decision" in response.json()["errors"]


def test_the_openapi_document_needs_a_token_and_lists_the_api() -> None:
    anonymous = Client().get("/api/openapi.json")
    paths = api(do_create_token(user=make_user("rita", "reviewer"))).get("/api/openapi.json").json()["paths"]

    assert anonymous.status_code == 401 and "Bearer" in anonymous.json()["detail"]

    assert {
        "/api/threads",
        "/api/threads/{thread_id}",
        "/api/approvals",
        "/api/approvals/{approval_id}/decision",
    } <= set(paths)


def test_pages_need_a_login_and_the_inbox_lists_pending_requests() -> None:
    request_ = make_gate()
    client = Client()
    assert client.get("/").status_code == 302

    client.force_login(make_user("rita", "reviewer"))
    page = client.get("/").content.decode()

    assert f'id="approval-{request_.pk}"' in page
    assert "ORD-1001" in page


def test_a_user_without_a_role_sees_no_inbox() -> None:
    client = Client()
    client.force_login(make_user("nobody"))

    assert client.get("/").status_code == 403


def test_model_text_with_html_is_shown_as_text_on_the_decision_page() -> None:
    request_ = make_gate(args={"order_id": "<script>alert(1)</script>", "amount_cents": 1})
    client = Client()
    client.force_login(make_user("rita", "reviewer"))

    page = client.get(f"/approvals/{request_.pk}/").content.decode()

    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.fixture
def quiet_reviewer_api(monkeypatch: pytest.MonkeyPatch) -> Client:
    """A reviewer's API client, with pushes switched off (they are not what is counted)."""
    monkeypatch.setattr("approvals.events._send", lambda group, message: None)
    return api(do_create_token(user=make_user("rita", "reviewer")))


def test_a_reviewers_decision_over_the_api_takes_ten_queries(
    settings: Any, django_capture_on_commit_callbacks: Any, quiet_reviewer_api: Client
) -> None:
    # The README's figure, counted once the token's last use is fresh: the token, the request,
    # the reviewer's groups and queues, the transaction's two ends, the thread's and the
    # request's locks, the decision's UPDATE and the ledger's append (three statements on
    # SQLite); the push reads nothing and the undo window's task is a send, not a query.
    settings.DECISION_UNDO_S = 5
    first, second = make_gate(), make_gate()

    approve_over_api(quiet_reviewer_api, first, django_capture_on_commit_callbacks)
    queries = approve_over_api(quiet_reviewer_api, second, django_capture_on_commit_callbacks)
    assert len(queries) == (10 if connection.vendor == "postgresql" else 12)


def test_an_admins_decision_over_the_api_takes_eight_queries(
    settings: Any, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The README's other figure, for the admin `make run` seeds (a superuser): no queue to read.
    monkeypatch.setattr("approvals.events._send", lambda group, message: None)
    ada = make_user("ada", "admin")
    ada.is_superuser = True
    ada.save()
    client = api(do_create_token(user=ada))
    settings.DECISION_UNDO_S = 5
    first, second = make_gate(), make_gate()

    approve_over_api(client, first, django_capture_on_commit_callbacks)
    queries = approve_over_api(client, second, django_capture_on_commit_callbacks)
    assert len(queries) == (8 if connection.vendor == "postgresql" else 10)


def approve_over_api(client: Client, request_: ApprovalRequest, on_commit: Any) -> list[str]:
    """Approve through the API, running the commit's callbacks; the SQL it ran."""
    with CaptureQueriesContext(connection) as queries, on_commit(execute=True):
        response = client.post(
            f"/api/approvals/{request_.pk}/decision", {"decision": "approve"}, content_type="application/json"
        )
    assert response.status_code == 200
    return [q["sql"] for q in queries.captured_queries]


def test_a_decision_that_takes_effect_at_once_resumes_the_thread_without_loading_its_state(
    settings: Any, django_capture_on_commit_callbacks: Any, quiet_reviewer_api: Client
) -> None:
    # Whether every gate at the checkpoint is decided is in its header and its writes: the
    # state's values (a long conversation's messages) are not read, nor the locked thread again.
    settings.DECISION_UNDO_S = 0
    request_ = make_gate()

    sql = approve_over_api(quiet_reviewer_api, request_, django_capture_on_commit_callbacks)

    assert Thread.objects.get(pk=request_.thread_id).status == ThreadStatus.RUNNING
    assert not [q for q in sql if "checkpoints_storedvalue" in q]
    thread_reads = [q for q in sql if q.startswith("SELECT") and " FROM checkpoints_thread " in q]
    # (SQLite's lease claim, in the resumed step, reads the lapsed owner with a SELECT of its own.)
    assert len([q for q in thread_reads if "lease_owner" not in q]) == 1  # the lock


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["claim", "decision"])
def test_a_call_without_its_body_says_a_json_object_is_needed(path: str) -> None:
    gate = make_gate()
    client = api(do_create_token(user=make_user("rita", "reviewer")))

    response = client.post(f"/api/approvals/{gate.pk}/{path}", "", content_type="application/json")

    assert response.status_code == 400
    assert response.json()["errors"] == {"body": "send a JSON object with this call's fields"}  # not ""
