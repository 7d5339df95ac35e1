"""approvals.access: one object per user answers every permission question, from two queries."""

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import selectors
from approvals.access import Access
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def test_a_users_rights_are_read_once_per_user_object() -> None:
    rita = make_user("rita", "reviewer", queues=("refunds",))
    make_user("sam", "reviewer", queues=("outreach",))
    rita = User.objects.get(pk=rita.pk)  # as a request loads it

    with CaptureQueriesContext(connection) as first:
        access = Access.of(rita)
        answers = (access.can_decide("refunds"), access.can_see_queue("outreach"), access.can_operate)
    with CaptureQueriesContext(connection) as again:
        same = Access.of(rita)
        assert (same.can_decide("refunds"), same.can_see_queue("outreach"), same.can_operate) == answers

    assert answers == (True, False, False)
    assert len(first) == 2  # the user's groups, the restricted queues
    assert same is access and len(again) == 0


def test_roles_follow_the_groups_and_the_admin_group_holds_them_all() -> None:
    rita, olga, ada = make_user("rita", "reviewer"), make_user("olga", "operator"), make_user("ada", "admin")
    root = User.objects.create_superuser("root", password="pw-for-tests-only")

    assert (Access(rita).is_reviewer, Access(rita).can_operate, Access(rita).is_admin) == (True, False, False)
    assert (Access(olga).is_reviewer, Access(olga).can_operate, Access(olga).can_manage_claims) == (
        False,
        True,
        False,
    )
    for everyone in (ada, root):
        access = Access(everyone)
        assert access.is_reviewer and access.can_operate and access.can_read_ledger
    assert not Access(AnonymousUser()).has_any_role
    rita.is_active = False
    assert not Access(rita).has_any_role


def test_admins_see_restricted_queues_they_are_not_a_member_of() -> None:
    make_user("rita", "reviewer", queues=("refunds",))
    ada = make_user("ada", "admin")

    assert Access(ada).can_decide("refunds") and Access(ada).closed_queues == frozenset()


def test_the_reassign_choices_cost_the_same_queries_for_three_reviewers_or_thirty() -> None:
    def choices_for(n: int) -> tuple[int, list[str]]:
        for i in range(n):
            make_user(f"r{n}-{i}", "reviewer", queues=("refunds",) if i % 2 else ())
        with CaptureQueriesContext(connection) as queries:
            names = [u.get_username() for u in selectors.eligible_reviewers("refunds")]
        return len(queries), names

    few, names = choices_for(3)
    many, more_names = choices_for(30)

    assert few == many <= 3
    # Only members of the refunds team may decide it once it is restricted.
    assert names == ["r3-1"] and len(more_names) == 1 + 15
