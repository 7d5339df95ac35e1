"""A cached `require` policy holds its groups' names: renaming or deleting a group (as the
Django admin does, through Group.save/delete) must reset the policy cache like a policy change."""

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group

from approvals import policy_cache
from approvals.actions.policies import do_create_policy
from approvals.models import ApprovalRequest
from tests.factories import make_gate

pytestmark = pytest.mark.django_db(transaction=True)  # other transactions see committed changes only


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    policy_cache._cached.clear()
    yield
    policy_cache._cached.clear()


@pytest.fixture
def finance(fresh_cache: None) -> Group:
    group = Group.objects.create(name="finance")
    do_create_policy(
        actor=None,
        fields={
            "name": "finance signs",
            "tool": "issue_refund",
            "when": "true",
            "action": "require",
            "approvers": 1,
        },
        groups=["finance"],
    )
    return group


def required_groups() -> list[str]:
    """Open a gate (its policies read through the cache) and say whose sign-off it needs."""
    gate: ApprovalRequest = make_gate()
    gate.refresh_from_db()
    return list(gate.required_groups)


def test_renaming_a_group_resets_the_cached_policies(finance: Group) -> None:
    assert required_groups() == ["finance"]  # the cache now holds the policy with its group's name

    finance.name = "treasury"
    finance.save()

    assert required_groups() == ["treasury"]


def test_deleting_a_group_resets_the_cached_policies(finance: Group) -> None:
    assert required_groups() == ["finance"]

    finance.delete()

    assert "finance" not in required_groups()
