"""A policy saved in Django admin while another save of it lands gets a version of its own: the
version is what a gate holds a matched policy to, and two different conditions both "v2" would
let a gate that read one decide by the other."""

from typing import Any

import pytest
from django.test import Client

from approvals.actions.policies import do_create_policy, do_update_policy
from approvals.admin import PolicyAdmin
from approvals.models import AuditEvent, Policy
from tests.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_save_racing_another_save_gets_the_next_version_not_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = do_create_policy(
        actor=None,
        fields={
            "name": "small",
            "tool": "issue_refund",
            "when": "args.amount_cents < 1000",
            "action": "approve",
        },
    )
    loaded = PolicyAdmin.get_object

    def another_save_lands_meanwhile(self: PolicyAdmin, *args: Any, **kwargs: Any) -> Any:
        obj = loaded(self, *args, **kwargs)  # the admin's copy: version 1
        do_update_policy(policy.pk, actor=None, fields={"when": "args.amount_cents < 2000"})  # v2
        return obj

    monkeypatch.setattr(PolicyAdmin, "get_object", another_save_lands_meanwhile)
    admin = Client()
    admin.force_login(make_user("ada", "admin"))
    form = {
        "name": "small",
        "tool": "issue_refund",
        "agent": "",
        "order": "100",
        "enabled": "on",
        "when": "args.amount_cents < 500",
        "action": "approve",
        "queue": "",
        "approvers": "2",
        "message": "",
        "thread_id": "",
    }
    answer = admin.post(f"/admin/approvals/policy/{policy.pk}/change/", form)

    assert answer.status_code == 302, answer.content.decode()[:2000]
    saved = Policy.objects.get(pk=policy.pk)
    assert (saved.when, saved.version) == ("args.amount_cents < 500", 3)
    versions = [e.data["policy"]["version"] for e in AuditEvent.objects.filter(action="policy.update")]
    assert sorted(versions) == [2, 3]
