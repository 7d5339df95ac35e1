"""The thread page's Revoke is for standing decisions: a reviewer's approval of a tool for the
rest of a thread, whose revoke only makes the thread stricter. A policy an admin scoped to one
thread that denies, routes or requires more approvers (Django admin's "One thread only", or
`thread_id` over the API) is the admin's rule: a reviewer revoking it would loosen the thread
(a refund routed to supervisors would come back to their own queue), so they may not; an admin
may, in Django admin."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from approvals.actions.policies import do_create_policy
from approvals.models import AuditEvent, Policy
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

RULES: dict[str, dict[str, Any]] = {
    "deny": {"action": "deny", "message": "Not on this account."},
    "route": {"action": "route", "queue": "supervisors"},
    "require": {"action": "require", "approvers": 2},
}


def page(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def admins_rule(thread_id: str, action: str) -> Policy:
    return do_create_policy(
        actor=make_user("ada", "admin"),
        fields={
            "name": f"{action} on this thread",
            "tool": "issue_refund",
            "when": "true",
            "order": 10,
            "thread_id": thread_id,
            **RULES[action],
        },
    )


@pytest.mark.parametrize("action", RULES)
def test_a_reviewer_cannot_revoke_an_admins_rule_for_the_thread(action: str) -> None:
    rita = make_user("rita", "reviewer")
    gate = make_gate()  # rita sees the thread: it has a request in her queue
    rule = admins_rule(gate.thread_id, action)

    answer = page(rita).post(f"/threads/{gate.thread_id}/standing/{rule.pk}/revoke/")

    assert answer.status_code == 404
    assert Policy.objects.filter(pk=rule.pk).exists()
    assert not AuditEvent.objects.filter(action="policy.delete").exists()
    # The thread page offers her no Revoke for it.
    html = page(rita).get(f"/threads/{gate.thread_id}/").content.decode()
    assert f"/standing/{rule.pk}/revoke/" not in html


def test_a_reviewer_still_revokes_her_standing_approval_beside_an_admins_rule() -> None:
    rita = make_user("rita", "reviewer")
    gate = make_gate()
    rule = admins_rule(gate.thread_id, "deny")
    answer = page(rita).post(f"/approvals/{gate.pk}/", {"decision": "approve", "standing": "tool"})
    assert answer.status_code == 302
    standing = Policy.objects.get(thread_id=gate.thread_id, action="approve")
    assert (
        f"/standing/{standing.pk}/revoke/" in page(rita).get(f"/threads/{gate.thread_id}/").content.decode()
    )

    assert page(rita).post(f"/threads/{gate.thread_id}/standing/{standing.pk}/revoke/").status_code == 302
    assert list(Policy.objects.filter(thread_id=gate.thread_id)) == [rule]
