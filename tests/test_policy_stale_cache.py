"""A policy changed while its version bump is lost (Redis unreachable at the commit) never decides
as it was: the gate checks the matched policy's row under its lock and, if it changed, reads
the policies again. The lost bump is announced once Redis answers again."""

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from approvals import policy_cache
from approvals.actions.policies import do_create_policy, do_update_policy
from approvals.models import ApprovalStatus, Policy
from tests.factories import make_gate

pytestmark = pytest.mark.django_db(transaction=True)
SMALL = {"order_id": "ORD-1001", "amount_cents": 4250}


@pytest.fixture
def approving(redis_ready: str) -> Iterator[Policy]:
    """A policy approving every refund, cached by this process at a first gate."""
    policy_cache.bump_version()
    policy = do_create_policy(
        actor=None,
        fields={"name": "small refunds", "tool": "issue_refund", "when": "true", "action": "approve"},
    )
    assert policy_cache.current_version() is not None  # the cache is in use
    assert make_gate(args=SMALL).status == ApprovalStatus.APPROVED
    yield policy
    policy_cache.bump_version()


def lose_the_bump(monkeypatch: pytest.MonkeyPatch) -> None:
    """The change's version bump never arrives: this process keeps its cached rules, as every
    other process does when Redis cannot be reached at the commit."""
    monkeypatch.setattr(policy_cache, "bump_version", lambda: None)


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


def test_a_bump_that_cannot_reach_redis_is_announced_when_it_answers_again(
    redis_ready: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = policy_cache._redis()
    before = policy_cache.current_version()
    real_set, failures = client.set, [redis.ConnectionError("Redis is restarting")] * 2

    def flaky_set(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return real_set(*args, **kwargs)

    monkeypatch.setattr(client, "set", flaky_set)
    policy_cache.bump_version()

    deadline = time.monotonic() + 10
    while policy_cache.current_version() == before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert policy_cache.current_version() != before
