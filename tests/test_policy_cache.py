"""Each tool's policies are cached per process and read again after any change: every gate reads
the policies' generation (one query), which every change writes anew in its own transaction;
the changing transaction reads its own changes."""

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from approvals import policy_cache
from approvals.actions.policies import do_create_policy, do_delete_policy, do_update_policy
from approvals.models import Policy, PolicyGeneration
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
def fresh_cache() -> Iterator[None]:
    policy_cache._cached.clear()
    yield
    policy_cache._cached.clear()


@pytest.mark.django_db(transaction=True)
def test_policies_are_read_once_and_again_after_each_committed_change(fresh_cache: None) -> None:
    first = create("first", order=1)

    assert queries(names) == (["first"], 2)  # the generation, then the rules
    assert queries(names) == (["first"], 1)  # cached: the generation only

    do_update_policy(first.pk, actor=None, fields={"name": "renamed"})
    assert queries(names) == (["renamed"], 2)
    create("second", order=2)
    assert names() == ["renamed", "second"]
    do_update_policy(first.pk, actor=None, fields={"enabled": False})
    assert names() == ["second"]
    do_delete_policy(Policy.objects.get(name="second").pk, actor=None)
    assert queries(names) == ([], 2)
    assert queries(names) == ([], 1)


@pytest.mark.django_db(transaction=True)
def test_another_process_sees_the_change_through_the_generation(fresh_cache: None) -> None:
    create("first")
    assert names() == ["first"]
    Policy.objects.filter(name="first").update(name="changed elsewhere")  # no signal: like another process
    assert names() == ["first"]  # still the cached rules: nothing announced the change

    PolicyGeneration.objects.filter(pk=1).update(value="another process")  # its change's generation

    assert names() == ["changed elsewhere"]


@pytest.mark.django_db(transaction=True)
def test_a_queryset_change_with_policies_changed_in_its_transaction_is_seen(fresh_cache: None) -> None:
    create("first")
    assert names() == ["first"]
    with transaction.atomic():
        Policy.objects.filter(name="first").update(name="bulk renamed")
        policy_cache.policies_changed()

    assert names() == ["bulk renamed"]


@pytest.mark.django_db(transaction=True)
def test_a_transaction_reads_its_own_changes_and_a_rolled_back_one_is_never_cached(fresh_cache: None) -> None:
    assert names() == []
    with transaction.atomic():
        create("uncommitted")
        assert names() == ["uncommitted"]
        transaction.set_rollback(True)

    assert names() == []
    assert queries(names) == ([], 1)


@pytest.mark.django_db(transaction=True)
def test_changing_a_policys_groups_is_a_change(fresh_cache: None) -> None:
    make_user("sue", "reviewer", queues=("supervisors",))
    policy = create("two", action="require", approvers=2)
    assert [r.groups for r in rules_for(agent="refunds", tool=TOOL, thread_id="t")] == [()]

    do_update_policy(policy.pk, actor=None, fields={}, groups=["supervisors-team"])

    assert [r.groups for r in rules_for(agent="refunds", tool=TOOL, thread_id="t")] == [("supervisors-team",)]


@pytest.mark.django_db(transaction=True)
def test_without_the_generations_row_every_gate_reads_the_database(fresh_cache: None) -> None:
    create("first")
    PolicyGeneration.objects.all().delete()  # as a flush leaves it until post_migrate

    assert queries(names) == (["first"], 2)
    assert queries(names) == (["first"], 2)


@pytest.mark.django_db(transaction=True)
def test_a_flush_is_a_change(fresh_cache: None) -> None:
    create("first")
    assert names() == ["first"]

    call_command("flush", interactive=False, verbosity=0)  # deletes rows without a signal per policy

    assert PolicyGeneration.objects.count() == 1  # written again after the flush
    assert names() == []
