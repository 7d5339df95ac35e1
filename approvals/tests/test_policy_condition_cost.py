"""A condition of nested comprehension macros over lists written in it could take seconds per
evaluation within the length limit (every gate of the tool evaluates it): refused with a 400 at
save and at preview, before it is run even once. Over the HTTP API and the admin's preview page
(Django's test client)."""

import time
from collections.abc import Iterator

import pytest
from django.test import Client

from agents.examples.agents import ConversationState
from agents.prebuilt import ToolAgent
from agents.registry import registry
from agents.tools import Approval, Decision, tool
from approvals.actions.policies import do_create_policy
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalStatus, Policy
from approvals.tests.test_policy_preview import FORM
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

LONG = "[" + ",".join(["1"] * 300) + "]"
TOO_COSTLY = [
    (f"{LONG}.map(x, {LONG}.map(y, y)).size() > 0", "would run about"),
    ("[1,2].all(a, [1,2].all(b, [1,2].all(c, true)))", "nests 3 macros"),
    ("effects.args.exists(a, a.x.exists(b, b.y.exists(c, true)))", "nests 3 macros"),
]
STILL_FINE = [
    "effects.args.exists(a, a.amount_cents > 5000)",
    "effects.args.exists(a, effects.args.exists(b, a.order_id == b.order_id))",
    "[1, 2, 3].all(x, x > 0) && args.order_id in ['ORD-1001', 'ORD-1002']",
    f"args.amount_cents in {LONG}",
]
BODY = {"name": "costly", "tool": "issue_refund", "action": "approve"}


def admin_api() -> Client:
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=make_user('ada', 'admin'))}"})


@pytest.mark.parametrize(("when", "says"), TOO_COSTLY)
def test_a_condition_too_costly_to_evaluate_is_a_400_at_once(when: str, says: str) -> None:
    started = time.monotonic()

    response = admin_api().post("/api/policies", {**BODY, "when": when}, content_type="application/json")

    assert response.status_code == 400, response.content
    assert says in response.json()["errors"]["when"]
    assert time.monotonic() - started < 1  # refused before it is run, not after
    assert not Policy.objects.exists()


@pytest.mark.parametrize(("when", "says"), TOO_COSTLY)
def test_the_previews_refuse_it_too(when: str, says: str) -> None:
    page = Client()
    page.force_login(make_user("olga", "admin"))

    shown = page.post("/policies/preview/", {**FORM, "when": when})
    answered = admin_api().post(
        "/api/policies/preview", {**BODY, "when": when}, content_type="application/json"
    )

    assert shown.status_code == 400 and says in shown.content.decode()
    assert answered.status_code == 400 and says in answered.content.decode()


@pytest.mark.parametrize("when", STILL_FINE)
def test_macros_over_what_the_call_brings_or_short_lists_are_still_accepted(when: str) -> None:
    response = admin_api().post("/api/policies", {**BODY, "when": when}, content_type="application/json")

    assert response.status_code == 201, response.content


BATCH_AGENT, BATCH_TOOL = "batches-test", "send_batch"


@tool(approval=Approval(queue="batches", decisions=(Decision.APPROVE, Decision.REJECT)))
def send_batch(ids: list[int], allowed: list[int]) -> str:
    """Send a batch of ids, checked against the allowed ones."""
    return "sent"


@pytest.fixture
def batch_agent() -> Iterator[None]:
    registry.register(ToolAgent(name=BATCH_AGENT, state=ConversationState, tools=[send_batch]))
    try:
        yield
    finally:
        registry.unregister(BATCH_AGENT)


def test_a_list_read_inside_a_macro_counts_its_length_at_the_gate(batch_agent: None) -> None:
    # Each `x in args.allowed` copies and scans the list: 3,000 x 3,000 took about a second
    # inside the step, estimated at 3,000 iterations. Now it is refused at once, as costly.
    when = "!args.ids.all(x, x in args.allowed)"
    do_create_policy(
        actor=None,
        fields={
            "name": "known ids",
            "agent": BATCH_AGENT,
            "tool": BATCH_TOOL,
            "when": when,
            "action": "deny",
        },
        groups=None,
    )
    many = list(range(3_000))

    costly = make_gate(agent=BATCH_AGENT, action=BATCH_TOOL, args={"ids": many, "allowed": many})
    short = make_gate(agent=BATCH_AGENT, action=BATCH_TOOL, args={"ids": [1, 2], "allowed": [1, 3]})

    assert (costly.status, costly.policy_name) == (ApprovalStatus.PENDING, "")
    assert "policy 'known ids' v1 could not be evaluated" in costly.status_reason
    assert "would run about 9,003,000 times" in costly.status_reason
    assert (short.status, short.policy_name) == (ApprovalStatus.REJECTED, "known ids")  # 2 is not allowed
