"""Policies fail safe: once a condition cannot be evaluated on the arguments a model sent (a
missing field, a wrong type, macros too costly for the lists the call brings), no later policy
decides the call; it waits for a person, in its own queue, and its pages say why."""

import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from agents.examples.agents import ConversationState
from agents.prebuilt import ToolAgent
from agents.registry import registry
from agents.tools import Approval, Decision, tool
from approvals.actions.policies import do_create_policy
from approvals.actions.policy_gates import do_apply_policies
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, ApprovalStatus, Policy
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

AGENT, TOOL = "mailing-test", "send_mailing"


@tool(approval=Approval(queue="outreach", decisions=(Decision.APPROVE, Decision.REJECT)))
def send_mailing(to: str | None, subject: str, items: list[int]) -> str:
    """Send a mailing (`to` may be left out: the model decides)."""
    return "sent"


@pytest.fixture(autouse=True)
def mailing_agent() -> Iterator[None]:
    registry.register(ToolAgent(name=AGENT, state=ConversationState, tools=[send_mailing]))
    try:
        yield
    finally:
        registry.unregister(AGENT)


ALLOWED = "!args.to.matches('@example\\\\.com$')"
NESTED = "args.items.all(x, args.items.exists(y, x == y))"


def policy(name: str, when: str, action: str, **fields: Any) -> Policy:
    return do_create_policy(
        actor=None, fields={"name": name, "tool": TOOL, "when": when, "action": action, **fields}, groups=None
    )


def mailing(to: str | None, items: list[int] | None = None) -> ApprovalRequest:
    args = {"to": to, "subject": "Hi", "items": items or [1, 2, 3]}
    return make_gate(agent=AGENT, action=TOOL, args=args)


def test_a_deny_that_fails_to_evaluate_leaves_the_call_to_a_person_not_to_a_later_policy(
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy("allowed domains", ALLOWED, "deny", order=10, message="Customers' own domains only.")
    policy("few emails", "effects.count < 3", "approve", order=20)
    policy("the rest to leads", "true", "route", order=30, queue="leads")

    with caplog.at_level(logging.WARNING, logger="approvals.policies"):
        injected = mailing(None)  # null: `matches` fails on it

    assert (injected.status, injected.policy_name, injected.queue) == (ApprovalStatus.PENDING, "", "outreach")
    assert "policy 'allowed domains' v1 could not be evaluated" in injected.status_reason
    assert "policy 'allowed domains' v1 could not be evaluated" in caplog.text
    rita = Client()
    rita.force_login(make_user("rita", "reviewer"))
    page = rita.get(reverse("approvals:decision", args=[injected.pk])).content.decode()
    assert "policy &#x27;allowed domains&#x27; v1 could not be evaluated" in page
    # The same policies still decide calls they can evaluate.
    assert mailing("ann@example.com").status == ApprovalStatus.APPROVED
    assert mailing("eve@evil.test").status == ApprovalStatus.REJECTED
    # A route tried before the failing policy still routes: it only adds a person's review.
    policy("one item to leads", "args.items.size() == 1", "route", order=5, queue="leads")
    routed = mailing(None, [7])
    assert (routed.status, routed.queue, routed.policy_name) == (
        ApprovalStatus.PENDING,
        "leads",
        "one item to leads",
    )


def test_a_nested_macro_over_a_huge_list_is_refused_at_once_and_left_to_a_person() -> None:
    policy("no duplicates", NESTED, "deny", order=10)
    policy("anything", "true", "approve", order=20)

    started = time.monotonic()
    huge = mailing("ann@example.com", list(range(10_000)))
    elapsed = time.monotonic() - started

    assert elapsed < 2  # evaluated, its ~10^8 iterations took 24 s here
    assert (huge.status, huge.policy_name) == (ApprovalStatus.PENDING, "")
    assert "policy 'no duplicates' v1 could not be evaluated" in huge.status_reason
    assert "would run about" in huge.status_reason
    # A short list is evaluated as before (and the condition holds: the deny decides).
    short = mailing("ann@example.com", [1, 2, 3])
    assert (short.status, short.policy_name) == (ApprovalStatus.REJECTED, "no duplicates")


def test_the_preview_shows_what_the_gate_does_with_a_condition_that_fails() -> None:
    policy("few emails", "effects.count < 3", "approve", order=20)
    before = mailing(None)
    assert before.status == ApprovalStatus.APPROVED  # no policy failed then
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=make_user('ada', 'admin'))}"})
    body = {"name": "allowed domains", "tool": TOOL, "when": ALLOWED, "action": "deny", "order": 10}

    shown = api.post("/api/policies/preview", body, content_type="application/json").json()

    [row] = shown["changed"]
    assert (row["request_id"], row["by_candidate"]) == (before.pk, True)
    assert row["would"].startswith("to a person: policy 'allowed domains' v1 could not be evaluated")
    assert shown["counts"] == {"to a person": 1}
    # Saved, the gate does what the preview said.
    policy("allowed domains", ALLOWED, "deny", order=10)
    after = mailing(None)
    assert after.status == ApprovalStatus.PENDING
    assert after.status_reason.removeprefix("Left to a person: ") == row["would"].removeprefix(
        "to a person: "
    )


def next_call(request_: ApprovalRequest, args: dict[str, Any]) -> ApprovalRequest:
    """Another call of the tool, later on the same thread, through the gate's policies."""
    later = ApprovalRequest.objects.get(pk=request_.pk)
    later.pk, later.key, later.status = None, f"call_{uuid.uuid4().hex[:8]}", ApprovalStatus.PENDING
    later.decided_by, later.decided_at, later.decision_args, later.undo_until = None, None, None, None
    later.args = args
    later.save()
    do_apply_policies([later], thread_id=later.thread_id, agent=later.agent)
    later.refresh_from_db()
    return later


def test_a_standing_approval_does_not_decide_a_call_an_earlier_policy_failed_on() -> None:
    first = mailing("ann@example.com")
    rita = Client()
    rita.force_login(make_user("rita", "reviewer"))
    assert (
        rita.post(f"/approvals/{first.pk}/", {"decision": "approve", "standing": "tool"}).status_code == 302
    )
    policy("allowed domains", ALLOWED, "deny", order=10)

    injected = next_call(first, {"to": None, "subject": "Hi", "items": [1]})
    fine = next_call(first, {"to": "bob@example.com", "subject": "Hi", "items": [1]})

    assert (injected.status, injected.policy_name) == (ApprovalStatus.PENDING, "")
    assert "policy 'allowed domains' v1 could not be evaluated" in injected.status_reason
    standing = Policy.objects.get(thread_id=first.thread_id)
    assert (fine.status, fine.policy_id) == (ApprovalStatus.APPROVED, standing.pk)
