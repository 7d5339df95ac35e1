"""The offline model reports a call a policy denied as an automatic rejection by that policy, never
as a reviewer's answer (no person decided it)."""

from agents.gates import HumanDecision
from agents.offline import rules
from agents.prebuilt import POLICY_PREFIX, rejection_text
from agents.tests.test_offline_model import EMAIL_TOOLS, REFUND_TOOLS, step, tool_result, user
from agents.tools import Decision

DENIED = rejection_text(
    HumanDecision(
        kind=Decision.REJECT,
        message="We only write to customers' own domains.",
        policy="'allowed domains' v1",
    )
)


def test_the_policy_prefix_matches_the_tool_agent() -> None:
    assert rules.POLICY_PREFIX == POLICY_PREFIX
    assert DENIED.startswith("Rejected automatically by policy 'allowed domains' v1: ")


def test_an_email_a_policy_denied_is_reported_as_the_policys_rejection() -> None:
    history = [user("Email eve@evil.net about the launch")]
    call = step(history, EMAIL_TOOLS)["tool_calls"][0]
    history.append(tool_result(call, DENIED))

    assert step(history, EMAIL_TOOLS)["content"] == (
        "I did not send the email: policy 'allowed domains' v1 rejected it automatically. "
        "We only write to customers' own domains."
    )


def test_a_refund_a_policy_denied_is_reported_as_the_policys_rejection() -> None:
    history = [user("Refund ORD-1001")]
    lookup = step(history, REFUND_TOOLS)["tool_calls"][0]
    history.append(tool_result(lookup, {"order_id": "ORD-1001", "total_cents": 4250}))
    refund = step(history, REFUND_TOOLS)["tool_calls"][0]
    denied = POLICY_PREFIX.format(policy="'small refunds only' v3")
    history.append(tool_result(refund, denied))

    assert step(history, REFUND_TOOLS)["content"] == (
        "I did not issue the refund for order ORD-1001: policy 'small refunds only' v3 rejected it "
        "automatically. no reason given."
    )
