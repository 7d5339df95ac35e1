"""Policies at the gate: approve, deny, route, require; CEL conditions refused when they do not
compile, failing safe (to a person, logged) when they fail to evaluate; every change and
decision in the ledger."""

import json
import logging
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.actions import InvalidInput
from agents.gates import DECISION_PREFIX
from agents.registry import registry
from agents.runtime import RESULT_PREFIX
from approvals.actions.decisions import check_decision, describe_closed, do_decide
from approvals.actions.policies import do_create_policy, do_delete_policy, do_update_policy
from approvals.actions.policy_gates import do_apply_policies
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent, Policy
from approvals.policies import compiled
from approvals.tests.helpers import steps_sent
from checkpoints.backends import get_backend
from checkpoints.models import Thread, ThreadStatus
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def policy(name: str, when: str, action: str, **fields: Any) -> Policy:
    groups = fields.pop("groups", None)
    return do_create_policy(
        actor=None,
        fields={"name": name, "tool": "issue_refund", "when": when, "action": action, **fields},
        groups=groups,
    )


def refund(cents: int) -> ApprovalRequest:
    return make_gate(args={"order_id": "ORD-1001", "amount_cents": cents})


def recorded_decision(request_: ApprovalRequest) -> Any:
    writes = get_backend().get_writes(thread_id=request_.thread_id, checkpoint_id=str(request_.checkpoint_id))
    return writes.get(DECISION_PREFIX + request_.key)


def thread_status(request_: ApprovalRequest) -> str:
    return Thread.objects.get(pk=request_.thread_id).status


def test_approve_policy_decides_the_gate_records_it_for_the_runtime_and_resumes() -> None:
    small = policy("small refunds", "args.amount_cents < 5000", "approve", message="Under $50.")

    request_ = refund(4250)

    assert (request_.status, request_.decided_by, request_.policy_id) == (
        ApprovalStatus.APPROVED,
        None,
        small.pk,
    )
    assert (request_.policy_name, request_.policy_version, request_.undo_until) == ("small refunds", 1, None)
    assert recorded_decision(request_)[1]["decision"] == "approve"
    assert thread_status(request_) == ThreadStatus.RUNNING
    event = AuditEvent.objects.get(approval_ref=request_.pk, action="decision.approve")
    assert (event.actor_name, event.data["policy"]) == (
        "system",
        {"id": small.pk, "name": "small refunds", "version": 1},
    )
    assert event.data["message"] == "Under $50."
    assert (
        describe_closed(request_) == "This request was approved automatically by policy 'small refunds' v1."
    )


def test_a_policys_decision_queues_the_step_with_new_threads_and_a_persons_ahead_of_them(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    policy("small refunds", "args.amount_cents < 5000", "approve")
    sent = steps_sent(monkeypatch)

    with django_capture_on_commit_callbacks(execute=True):
        automatic = refund(4250)
    with django_capture_on_commit_callbacks(execute=True):
        by_hand = refund(9900)
        reviewer = make_user("rita", "reviewer")
        do_decide(
            by_hand, reviewer=reviewer, valid=check_decision(by_hand, user=reviewer, decision="approve")
        )

    # RESUME_QUEUE is for people: a busy auto-approve policy must not fill it ahead of them.
    assert sent == [(str(automatic.checkpoint_id), False), (str(by_hand.checkpoint_id), True)]


def test_no_matching_policy_leaves_the_gate_to_a_person() -> None:
    policy("small refunds", "args.amount_cents < 5000", "approve")

    request_ = refund(9000)

    assert (request_.status, request_.queue, request_.policy_id) == (ApprovalStatus.PENDING, "refunds", None)
    assert thread_status(request_) == ThreadStatus.WAITING
    assert recorded_decision(request_) is None


def test_deny_policy_rejects_and_tells_the_agent_why() -> None:
    policy(
        "no huge refunds", "args.amount_cents > 100000", "deny", message="Refunds over $1,000 need a manager."
    )

    request_ = refund(250000)

    assert request_.status == ApprovalStatus.REJECTED
    decision = recorded_decision(request_)[1]
    assert decision["decision"] == "reject"
    assert decision["message"] == "Refunds over $1,000 need a manager."
    assert decision["policy"] == "'no huge refunds' v1"
    assert thread_status(request_) == ThreadStatus.RUNNING
    assert AuditEvent.objects.filter(approval_ref=request_.pk, action="decision.reject").exists()


def test_route_policy_sends_the_request_to_its_queue_and_leaves_it_pending() -> None:
    policy("big refunds", "args.amount_cents > 50000", "route", queue="supervisors")

    request_ = refund(60000)
    request_.refresh_from_db()

    assert (request_.status, request_.queue, request_.policy_name) == (
        ApprovalStatus.PENDING,
        "supervisors",
        "big refunds",
    )
    assert thread_status(request_) == ThreadStatus.WAITING
    assert AuditEvent.objects.filter(approval_ref=request_.pk, action="policy.route").exists()


def test_require_policy_sets_the_number_of_approvers_and_their_groups() -> None:
    make_user("sue", "reviewer", queues=("supervisors",))
    policy("two people", "args.amount_cents > 100000", "require", approvers=2, groups=["supervisors-team"])

    request_ = refund(150000)
    request_.refresh_from_db()

    assert (request_.status, request_.required_approvals, request_.required_groups) == (
        ApprovalStatus.PENDING,
        2,
        ["supervisors-team"],
    )


def test_a_number_the_model_writes_as_text_is_judged_as_the_number_its_tool_reads() -> None:
    # `"600000" > 100000` is a CEL type error, which matches no policy: the request went to one
    # reviewer in the plain queue, and the tool then read 600000.
    policy("no huge refunds", "args.amount_cents > 500000", "deny", message="Ask a manager.")
    policy("two people", "args.amount_cents > 100000", "require", approvers=2)

    huge = make_gate(args={"order_id": "ORD-1004", "amount_cents": "600000"})
    large = make_gate(args={"order_id": "ORD-1004", "amount_cents": "150000"})
    large.refresh_from_db()

    assert (huge.status, huge.args["amount_cents"]) == (ApprovalStatus.REJECTED, 600000)
    assert (large.status, large.required_approvals) == (ApprovalStatus.PENDING, 2)


@pytest.mark.parametrize("agent", ["refunds_pydantic_ai", "refunds_langgraph", "refunds_openai_agents"])
def test_a_framework_agents_gate_holds_the_arguments_as_its_tool_reads_them(agent: str) -> None:
    from pydantic_ai.messages import ToolCallPart

    proposed = {"order_id": "ORD-1004", "amount_cents": "600000"}
    definition: Any = registry.get(agent)
    if agent == "refunds_pydantic_ai":
        [gate] = definition._gates([ToolCallPart(tool_name="issue_refund", args=proposed, tool_call_id="c1")])
    elif agent == "refunds_openai_agents":
        call = {
            "type": "function_call",
            "name": "issue_refund",
            "arguments": json.dumps(proposed),
            "call_id": "c1",
        }
        [gate] = definition._gates([call])
    else:
        request = {"action_requests": [{"name": "issue_refund", "args": proposed}], "review_configs": []}
        [gate] = definition._gates([{"id": "i1", "value": request}])

    assert gate.args == {"order_id": "ORD-1004", "amount_cents": 600000}


def test_the_first_matching_policy_in_order_decides() -> None:
    policy("deny everything", "true", "deny", order=20)
    policy("approve small", "args.amount_cents < 5000", "approve", order=10)

    assert refund(100).status == ApprovalStatus.APPROVED
    assert refund(9000).status == ApprovalStatus.REJECTED


def test_disabled_expired_and_other_agents_policies_do_not_apply() -> None:
    policy("off", "true", "deny", enabled=False)
    policy("over", "true", "deny", until=timezone.now() - timedelta(minutes=1))
    policy("elsewhere", "true", "deny", agent="outreach")

    assert refund(100).status == ApprovalStatus.PENDING


def test_a_condition_that_does_not_compile_is_refused_with_the_cel_error() -> None:
    with pytest.raises(InvalidInput) as error:
        policy("broken", "args.amount_cents <", "approve")

    assert "CEL error" in error.value.errors["when"]
    assert "Syntax error" in error.value.errors["when"]
    assert not Policy.objects.exists()
    with pytest.raises(ValidationError):  # the admin form runs the same check
        Policy(name="x", tool="issue_refund", when="((", action="approve").full_clean()


def test_a_condition_naming_an_unknown_variable_is_refused() -> None:
    with pytest.raises(InvalidInput) as error:
        policy("typo", "arg.amount_cents < 5000", "approve")

    assert "arg" in error.value.errors["when"]
    assert "args, agent, tool, thread, effects, now" in error.value.errors["when"]


@pytest.mark.parametrize(
    "when",
    [
        "agent == 'refunds' && tenantt == 'acme'",
        "tool == 'issue_refund' && args.amount_cents > limit",
        # A macro's variable outside its macro: unknown there, though the macro binds it.
        "agent == 'refunds' && a > 5 || effects.args.exists(a, a.amount_cents > 0)",
        "effects.args.exists(a, a.amount_cents > 0) && args.tags.all(t, t != '') && t == 'x'",
    ],
)
def test_an_unknown_variable_is_refused_even_where_evaluation_would_never_reach_it(when: str) -> None:
    with pytest.raises(InvalidInput) as error:
        policy("typo", when, "approve")

    assert "unknown variable" in error.value.errors["when"]


def test_a_variable_a_macro_binds_is_not_unknown() -> None:
    made = policy("repeat", "effects.args.exists(a, a.order_id == args.order_id)", "approve")
    assert made.when.startswith("effects.args.exists")
    nested = "effects.args.exists(a, args.tags.exists(t, t == a.tag)) && args.ids.map(i, i * 2).all(d, d > 0)"
    assert policy("nested", nested, "approve").when == nested
    quoted = "args.note == 'exists(a, ' && effects.args.all(a, a.ok) // a comment naming a"
    assert policy("quoted", quoted, "approve").when == quoted


def test_route_without_a_queue_and_require_without_approvers_are_refused() -> None:
    with pytest.raises(InvalidInput) as error:
        policy("nowhere", "true", "route")
    assert "queue" in error.value.errors
    with pytest.raises(InvalidInput) as error:
        policy("nobody", "true", "require", approvers=0)
    assert "approvers" in error.value.errors


def test_a_condition_that_fails_to_evaluate_leaves_the_call_to_a_person_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy("missing field", "args.currency == 'EUR'", "deny", order=1)
    policy("small refunds", "args.amount_cents < 5000", "approve", order=2)

    with caplog.at_level(logging.WARNING, logger="approvals.policies"):
        request_ = refund(100)

    assert (request_.status, request_.policy_name) == (ApprovalStatus.PENDING, "")
    assert "policy 'missing field' v1 could not be evaluated" in request_.status_reason
    assert "policy 'missing field' v1 could not be evaluated" in caplog.text


def test_conditions_see_agent_tool_thread_and_now() -> None:
    policy(
        "context",
        "agent == 'refunds' && tool == 'issue_refund' && thread.id.startsWith('refunds-')"
        " && thread.tenant == '' && now > timestamp('2020-01-01T00:00:00Z')",
        "approve",
    )

    assert refund(100).status == ApprovalStatus.APPROVED


def test_effects_hold_the_sum_already_done_on_the_thread() -> None:
    rita = make_user("rita", "reviewer")
    first = refund(2000)
    do_decide(first, reviewer=rita, valid=check_decision(first, user=rita, decision="approve"))
    get_backend().put_write(
        thread_id=first.thread_id,
        checkpoint_id=str(first.checkpoint_id),
        task_id=RESULT_PREFIX + first.key,
        kind="result",
        value="refunded",
    )
    policy(
        "thread budget",
        "effects.count == 1 && effects.sum.amount_cents + args.amount_cents <= 5000",
        "approve",
    )
    again = ApprovalRequest.objects.create(
        thread_id=first.thread_id,
        checkpoint_id=first.checkpoint_id,
        key="call_second",
        agent="refunds",
        action="issue_refund",
        args={"order_id": "ORD-1001", "amount_cents": 2500},
        allowed_decisions=first.allowed_decisions,
        state_digest=first.state_digest,
    )
    too_much = ApprovalRequest.objects.create(
        thread_id=first.thread_id,
        checkpoint_id=first.checkpoint_id,
        key="call_third",
        agent="refunds",
        action="issue_refund",
        args={"order_id": "ORD-1001", "amount_cents": 3001},
        allowed_decisions=first.allowed_decisions,
        state_digest=first.state_digest,
    )

    do_apply_policies([again, too_much], thread_id=first.thread_id, agent="refunds")

    assert (again.status, too_much.status) == (ApprovalStatus.APPROVED, ApprovalStatus.PENDING)


def test_policy_changes_are_versioned_and_in_the_ledger_with_the_diff() -> None:
    ada = make_user("ada", "admin")
    small = do_create_policy(
        actor=ada,
        fields={"name": "small refunds", "tool": "issue_refund", "when": "true", "action": "approve"},
    )
    do_update_policy(small.pk, actor=ada, fields={"when": "args.amount_cents < 5000"})
    do_update_policy(small.pk, actor=ada, fields={"when": "args.amount_cents < 5000"})  # no change
    small.refresh_from_db()
    do_delete_policy(small.pk, actor=ada)

    events = list(AuditEvent.objects.filter(action__startswith="policy.").order_by("id"))
    assert [e.action for e in events] == ["policy.create", "policy.update", "policy.delete"]
    assert [e.actor_name for e in events] == ["ada", "ada", "ada"]
    assert events[0].data["diff"]["when"] == [None, "true"]
    assert events[1].data["diff"] == {"when": ["true", "args.amount_cents < 5000"]}
    assert events[1].data["policy"]["version"] == 2
    assert events[2].data["diff"]["name"] == ["small refunds", None]
    assert small.version == 2


def test_an_automatic_decision_records_the_version_in_force() -> None:
    small = policy("small refunds", "args.amount_cents < 100", "approve")
    do_update_policy(small.pk, actor=None, fields={"when": "args.amount_cents < 5000"})
    do_update_policy(small.pk, actor=None, fields={"message": "Small."})

    request_ = refund(4250)

    assert request_.policy_label == "'small refunds' v3"
    assert (
        AuditEvent.objects.get(approval_ref=request_.pk, action="decision.approve").data["policy"]["version"]
        == 3
    )


def test_conditions_are_compiled_once_per_text() -> None:
    compiled.cache_clear()
    policy("small refunds", "args.amount_cents < 5000", "approve")
    for _ in range(3):
        refund(100)

    assert compiled.cache_info().misses == 1


ALLOWED_DOMAINS = "!args.to.matches('@(example\\\\.com|acme\\\\.org)$')"  # as in the README


def test_readme_refund_examples_decide_as_documented() -> None:
    make_user("sue", "reviewer", queues=("supervisors",))
    policy(
        "small refunds",
        "args.amount_cents < 5000 && effects.sum.amount_cents + args.amount_cents <= 10000",
        "approve",
    )
    policy("large refunds", "args.amount_cents > 50000", "route", queue="supervisors", order=20)
    policy("two people", "args.amount_cents > 100000", "require", approvers=2, order=10)

    small, middle, large, huge = (refund(c) for c in (4999, 20000, 60000, 150000))
    large.refresh_from_db()
    huge.refresh_from_db()

    assert small.status == ApprovalStatus.APPROVED
    assert (middle.status, middle.policy_id) == (ApprovalStatus.PENDING, None)
    assert (large.queue, large.required_approvals) == ("supervisors", 1)
    assert (huge.queue, huge.required_approvals) == ("refunds", 2)


def test_readme_email_allow_list_denies_other_domains() -> None:
    do_create_policy(
        actor=None,
        fields={
            "name": "allowed domains",
            "tool": "send_email",
            "when": ALLOWED_DOMAINS,
            "action": "deny",
            "message": "We only write to customers' own domains.",
        },
    )

    def email(to: str) -> ApprovalRequest:
        return make_gate(
            agent="outreach", action="send_email", args={"to": to, "subject": "Hi", "body": "Hello"}
        )

    assert email("bob@example.com").status == ApprovalStatus.PENDING
    assert email("ann@acme.org").status == ApprovalStatus.PENDING
    denied = email("eve@evil.example.net")
    assert denied.status == ApprovalStatus.REJECTED
    assert denied.decision_message == "We only write to customers' own domains."


def test_a_condition_on_the_threads_tenant_reads_the_threads_metadata() -> None:
    request_ = refund(4250)
    Thread.objects.filter(pk=request_.thread_id).update(metadata={"tenant": "org:acme"})
    policy("acme", "thread.tenant == 'org:acme'", "approve")

    do_apply_policies([request_], thread_id=request_.thread_id, agent=request_.agent)

    assert ApprovalRequest.objects.get(pk=request_.pk).status == ApprovalStatus.APPROVED


@pytest.mark.parametrize(
    ("when", "reads_thread"),
    [
        ("args.amount_cents > 999999", False),
        ("thread.id == 'elsewhere'", False),  # the id is known at the gate
        ("thread.tenant == 'elsewhere'", True),
        ("thread.metadata.vip == true", True),
    ],
)
def test_the_threads_metadata_is_read_only_when_a_condition_reads_the_thread(
    when: str, reads_thread: bool
) -> None:
    request_ = refund(4250)
    policy("never", when, "approve")

    with CaptureQueriesContext(connection) as queries:
        assert do_apply_policies([request_], thread_id=request_.thread_id, agent="refunds") is False

    thread_reads = [q["sql"] for q in queries.captured_queries if "checkpoints_thread" in q["sql"]]
    assert bool(thread_reads) is reads_thread
