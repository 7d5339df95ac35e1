"""Each tool's policies are cached per process and read again after any change: a version in
Redis is bumped when a change commits; the changing transaction reads its own changes."""

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from approvals import policy_cache
from approvals.actions.policies import do_create_policy, do_delete_policy, do_update_policy
from approvals.models import Policy
from approvals.policies import rules_for
from tests.factories import make_user

TOOL = "issue_refund"


def names() -> list[str]:
    return [r.name for r in rules_for(agent="refunds", tool=TOOL, thread_id="t-1")]


def queries(fn: Any) -> tuple[Any, int]:
    with CaptureQueriesContext(connection) as captured:
        result = fn()
    return result, len(captured)


def create(name: str, **fields: Any) -> Policy:
    return do_create_policy(
        actor=None, fields={"name": name, "tool": TOOL, "when": "true", "action": "approve", **fields}
    )


@pytest.fixture
def fresh_cache(redis_ready: str) -> Iterator[None]:
    policy_cache.bump_version()
    yield
    policy_cache.bump_version()


@pytest.mark.django_db(transaction=True)
def test_policies_are_read_once_and_again_after_each_committed_change(fresh_cache: None) -> None:
    first = create("first", order=1)

    assert queries(names) == (["first"], 1)
    assert queries(names) == (["first"], 0)  # cached: no query at the gate

    do_update_policy(first.pk, actor=None, fields={"name": "renamed"})
    assert queries(names) == (["renamed"], 1)
    create("second", order=2)
    assert names() == ["renamed", "second"]
    do_update_policy(first.pk, actor=None, fields={"enabled": False})
    assert names() == ["second"]
    do_delete_policy(Policy.objects.get(name="second").pk, actor=None)
    assert queries(names) == ([], 1)
    assert queries(names) == ([], 0)


@pytest.mark.django_db(transaction=True)
def test_another_process_sees_the_change_through_the_version(fresh_cache: None) -> None:
    create("first")
    assert names() == ["first"]
    Policy.objects.filter(name="first").update(name="changed elsewhere")  # no signal: like another process
    assert names() == ["first"]  # still the cached rules: nothing announced the change

    redis.Redis.from_url(policy_cache.settings.REDIS_URL).set(policy_cache.VERSION_KEY, "another process")

    assert names() == ["changed elsewhere"]


@pytest.mark.django_db(transaction=True)
def test_a_transaction_reads_its_own_changes_and_a_rolled_back_one_is_never_cached(fresh_cache: None) -> None:
    assert names() == []
    with transaction.atomic():
        create("uncommitted")
        assert names() == ["uncommitted"]
        transaction.set_rollback(True)

    assert names() == []
    assert queries(names) == ([], 0)


@pytest.mark.django_db(transaction=True)
def test_changing_a_policys_groups_is_a_change(fresh_cache: None) -> None:
    make_user("sue", "reviewer", queues=("supervisors",))
    policy = create("two", action="require", approvers=2)
    assert [r.groups for r in rules_for(agent="refunds", tool=TOOL, thread_id="t")] == [()]

    do_update_policy(policy.pk, actor=None, fields={}, groups=["supervisors-team"])

    assert [r.groups for r in rules_for(agent="refunds", tool=TOOL, thread_id="t")] == [("supervisors-team",)]


@pytest.mark.django_db(transaction=True)
def test_without_redis_every_gate_reads_the_database(
    fresh_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    create("first")
    monkeypatch.setattr(
        policy_cache, "_client", redis.Redis(port=1, socket_timeout=0.2, socket_connect_timeout=0.2)
    )

    assert queries(names) == (["first"], 1)
    assert queries(names) == (["first"], 1)


@pytest.mark.django_db(transaction=True)
def test_a_flush_is_a_change(fresh_cache: None) -> None:
    create("first")
    assert names() == ["first"]

    call_command("flush", interactive=False, verbosity=0)  # deletes rows without a signal per policy

    assert names() == []
