"""A standing decision revoked (or a policy deleted) while a step's gate is matched against it:
exactly one wins. Either the gate is decided by the rule (the request keeps its name and
version, its policy link cleared by the revoke) and the revoke succeeds, or the revoke commits
first and the gate waits for a person; never an IntegrityError at the step's commit (which
threw the step's model call away for a retry) nor a 500."""

import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client

from agents import llm, runtime
from agents.registry import registry
from approvals.actions import policy_gates
from approvals.actions.ledger import verify_ledger
from approvals.actions.policies import do_create_policy
from approvals.actions.standing import STANDING_ORDER
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent, Policy
from approvals.tests.helpers import steps_sent
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import CheckpointSource, Thread, ThreadStatus
from tests.at_once import waiting_for_a_lock
from tests.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)

ARGS = {"order_id": "ORD-1001", "amount_cents": 4250}
WAIT_S = 10


def model_calls_the_refund(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The model answers every call with issue_refund(ARGS); returns the calls made, counted."""
    calls: list[int] = []

    def complete(**kwargs: Any) -> llm.ModelReply:
        calls.append(1)
        call = llm.ToolCall(
            id=f"call_{uuid.uuid4().hex[:8]}", name="issue_refund", arguments=json.dumps(ARGS)
        )
        return llm.ModelReply(content=None, tool_calls=[call], model="test")

    monkeypatch.setattr(llm, "complete", complete)
    return calls


def thread_at_the_model() -> tuple[str, str]:
    """A running refunds thread whose next step asks the model: (thread id, its head)."""
    agent = registry.get("refunds")
    with transaction.atomic():
        thread, first = get_backend().create_thread(
            thread_id=f"refunds-{uuid.uuid4().hex[:8]}",
            agent="refunds",
            status=ThreadStatus.RUNNING,
            first=NewCheckpoint(
                values=agent.initial_values("Please refund order ORD-1001"),
                source=CheckpointSource.INPUT,
                next=["model"],
            ),
        )
    return thread.id, str(first.id)


def standing_on(thread_id: str) -> Policy:
    """Rita's standing approval of issue_refund on the thread, as the decision page saves it."""
    return do_create_policy(
        actor=make_user("rita", "reviewer"),
        fields={
            "name": "standing approval of this tool by rita",
            "agent": "refunds",
            "tool": "issue_refund",
            "when": "true",
            "action": "approve",
            "order": STANDING_ORDER,
            "thread_id": thread_id,
        },
    )


def revoker(thread_id: str, policy: Policy) -> Callable[[dict[str, Any]], None]:
    """Bob's Revoke on the thread page, to run on a connection of its own: records its status
    code (or error) and the backend pid it ran on in `out`."""
    client = Client()
    # A reviewer (who may revoke) and operator (who sees every thread, gates opened or not).
    client.force_login(make_user("bob", "reviewer", "operator"))

    def revoke(out: dict[str, Any]) -> None:
        try:
            if connection.vendor == "postgresql":
                connection.ensure_connection()
                out["pid"] = connection.connection.info.backend_pid
            answer = client.post(f"/threads/{thread_id}/standing/{policy.pk}/revoke/")
            out["status"] = answer.status_code
        except Exception as exc:
            out["error"] = exc
        finally:
            connection.close()

    return revoke


def blocked_or_done(worker: threading.Thread, out: dict[str, Any]) -> None:
    """Wait until the revoke has finished or waits on a row lock."""
    for _ in range(WAIT_S * 50):
        if not worker.is_alive() or ("pid" in out and waiting_for_a_lock(out["pid"])):
            return
        threading.Event().wait(0.02)
    raise AssertionError("the revoke neither finished nor waited for a lock")


def run_step(thread_id: str, head: str) -> dict[str, Any]:
    """The thread's step as a worker runs it: its outcome, or the error a retry would follow."""
    try:
        return {"outcome": runtime.run_step(thread_id=thread_id, checkpoint_id=head, worker="w1")}
    except Exception as exc:
        return {"error": exc}


def the_request(thread_id: str) -> ApprovalRequest:
    return ApprovalRequest.objects.get(thread_id=thread_id)


def assert_ledger_whole() -> None:
    report = verify_ledger()
    assert report.ok, [str(p) for p in report.problems]


def test_a_rule_read_before_its_revoke_committed_sends_the_gate_to_a_person(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker whose cached rules still hold a standing decision revoked meanwhile (the
    revoke's version bump not yet seen) does not decide the gate by it."""
    steps_sent(monkeypatch)
    model_calls_the_refund(monkeypatch)
    thread_id, head = thread_at_the_model()
    standing = standing_on(thread_id)
    cached = policy_gates.rules_for(agent="refunds", tool="issue_refund", thread_id=thread_id)
    revoke: dict[str, Any] = {}
    revoker(thread_id, standing)(revoke)
    monkeypatch.setattr(policy_gates, "rules_for", lambda **kwargs: cached)

    step = run_step(thread_id, head)

    assert revoke.get("status") == 302 and not Policy.objects.exists(), revoke
    assert "error" not in step, step
    assert step["outcome"].kind == "stepped"
    request_ = the_request(thread_id)
    assert (request_.status, request_.policy_id, request_.policy_name) == (ApprovalStatus.PENDING, None, "")
    assert Thread.objects.get(pk=thread_id).status == ThreadStatus.WAITING
    assert not AuditEvent.objects.filter(action__startswith="decision.").exists()
    assert_ledger_whole()


@pytest.mark.postgres_only
def test_a_revoke_that_commits_after_the_match_waits_for_the_gate_and_succeeds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The step matched the standing decision and is deciding by it when the revoke comes:
    the step commits its decision, then the revoke deletes the rule."""
    sent = steps_sent(monkeypatch)
    calls = model_calls_the_refund(monkeypatch)
    thread_id, head = thread_at_the_model()
    standing = standing_on(thread_id)
    revoke: dict[str, Any] = {}
    revoking = threading.Thread(target=revoker(thread_id, standing), args=(revoke,))
    decide = policy_gates.do_decide_by_policy

    def revoked_meanwhile(request_: ApprovalRequest, **kwargs: Any) -> None:
        revoking.start()
        blocked_or_done(revoking, revoke)
        decide(request_, **kwargs)

    monkeypatch.setattr(policy_gates, "do_decide_by_policy", revoked_meanwhile)

    step = run_step(thread_id, head)
    revoking.join(WAIT_S)

    assert "error" not in step, step
    assert revoke == {"pid": revoke["pid"], "status": 302}
    request_ = the_request(thread_id)
    assert (request_.status, request_.decided_by) == (ApprovalStatus.APPROVED, None)
    # The rule is gone; the decision keeps what it was, as for any deleted policy.
    assert (request_.policy_id, request_.policy_name, request_.policy_version) == (
        None,
        standing.name,
        standing.version,
    )
    assert not Policy.objects.exists()
    assert Thread.objects.get(pk=thread_id).status == ThreadStatus.RUNNING
    assert len(calls) == 1 and len(sent) == 1  # the step ran once; its resumed successor is sent
    decision = AuditEvent.objects.get(action="decision.approve")
    deletion = AuditEvent.objects.get(action="policy.delete")
    assert decision.pk < deletion.pk
    assert decision.data["policy"] == {"id": standing.pk, "name": standing.name, "version": standing.version}
    assert_ledger_whole()


@pytest.mark.postgres_only
def test_a_revoke_that_commits_before_the_rule_is_applied_sends_the_gate_to_a_person(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The step's match found the standing decision, then the revoke committed before the step
    applied it: the gate waits for a person, in the same step."""
    steps_sent(monkeypatch)
    calls = model_calls_the_refund(monkeypatch)
    thread_id, head = thread_at_the_model()
    standing = standing_on(thread_id)
    revoke: dict[str, Any] = {}
    revoking = threading.Thread(target=revoker(thread_id, standing), args=(revoke,))
    match = policy_gates.first_match

    def revoked_after_matching(rules: Any, **kwargs: Any) -> Any:
        rule = match(rules, **kwargs)
        if not revoking.ident:
            revoking.start()
            revoking.join(WAIT_S)
        return rule

    monkeypatch.setattr(policy_gates, "first_match", revoked_after_matching)

    step = run_step(thread_id, head)

    assert revoke == {"pid": revoke["pid"], "status": 302}
    assert "error" not in step, step
    assert step["outcome"].kind == "stepped"
    request_ = the_request(thread_id)
    assert (request_.status, request_.policy_id, request_.policy_name) == (ApprovalStatus.PENDING, None, "")
    assert Thread.objects.get(pk=thread_id).status == ThreadStatus.WAITING
    assert len(calls) == 1
    assert not Policy.objects.exists()
    assert not AuditEvent.objects.filter(action__startswith="decision.").exists()
    assert_ledger_whole()
