"""A policy changed after a gate read the policies' generation (so the gate's rules, cached or
just read, are older than the change) never decides as it was: the gate checks the matched
policy's row under its lock and, if it changed, reads the policies again."""

from collections.abc import Iterator

import pytest

from approvals import policy_cache
from approvals.actions.policies import do_create_policy, do_update_policy
from approvals.models import ApprovalStatus, Policy
from tests.factories import make_gate

pytestmark = pytest.mark.django_db(transaction=True)
SMALL = {"order_id": "ORD-1001", "amount_cents": 4250}


@pytest.fixture
def approving() -> Iterator[Policy]:
    """A policy approving every refund, cached by this process at a first gate."""
    policy_cache._cached.clear()
    policy = do_create_policy(
        actor=None,
        fields={"name": "small refunds", "tool": "issue_refund", "when": "true", "action": "approve"},
    )
    assert policy_cache.current_generation() is not None  # the cache is in use
    assert make_gate(args=SMALL).status == ApprovalStatus.APPROVED
    yield policy
    policy_cache._cached.clear()


def lose_the_bump(monkeypatch: pytest.MonkeyPatch) -> None:
    """The change writes no new generation: this process keeps its cached rules, as a gate that
    read the generation just before the change committed keeps the rules it read."""
    monkeypatch.setattr(policy_cache, "policies_changed", lambda: None)


def test_a_policy_disabled_while_its_bump_is_lost_sends_the_next_gate_to_a_person(
    approving: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    lose_the_bump(monkeypatch)
    do_update_policy(approving.pk, actor=None, fields={"enabled": False})

    second = make_gate(args=SMALL)

    assert (second.status, second.decided_by, second.policy_id) == (ApprovalStatus.PENDING, None, None)


def test_a_policy_edited_while_its_bump_is_lost_decides_by_its_new_version(
    approving: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    lose_the_bump(monkeypatch)
    do_update_policy(approving.pk, actor=None, fields={"action": "deny", "message": "Ask a manager."})

    second = make_gate(args=SMALL)

    assert (second.status, second.policy_version) == (ApprovalStatus.REJECTED, 2)


def test_a_policy_edited_to_no_longer_match_lets_the_next_rule_decide(
    approving: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    do_create_policy(
        actor=None,
        fields={
            "name": "route the rest",
            "tool": "issue_refund",
            "action": "route",
            "queue": "refunds",
            "order": 200,
        },
    )
    make_gate(args=SMALL)  # cached again, with both
    lose_the_bump(monkeypatch)
    do_update_policy(approving.pk, actor=None, fields={"when": "args.amount_cents > 100000"})

    second = make_gate(args=SMALL)

    assert (second.status, second.policy_name, second.queue) == (
        ApprovalStatus.PENDING,
        "route the rest",
        "refunds",
    )
