"""The policies API and admin: admins only, compile errors as 400, every change in the ledger."""

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from approvals.actions.policies import do_create_policy, do_update_policy
from approvals.actions.tokens import do_create_token
from approvals.api.policies import PreviewIn
from approvals.models import AuditEvent, Policy
from tests.factories import make_user

pytestmark = pytest.mark.django_db

SMALL = {
    "name": "small refunds",
    "tool": "issue_refund",
    "when": "args.amount_cents < 5000",
    "action": "approve",
}


def api_as(*roles: str, name: str = "ada") -> Client:
    user = make_user(name, *roles)
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=user)}"})


def post(client: Client, path: str, body: dict[str, Any]) -> Any:
    return client.post(path, body, content_type="application/json")


def test_an_admin_creates_reads_changes_and_deletes_a_policy() -> None:
    client = api_as("admin")

    created = post(client, "/api/policies", {**SMALL, "message": "Under $50."})
    assert created.status_code == 201, created.content
    pid = created.json()["id"]
    assert created.json()["version"] == 1
    assert [p["name"] for p in client.get("/api/policies").json()] == ["small refunds"]
    changed = client.patch(f"/api/policies/{pid}", {"order": 5}, content_type="application/json")
    assert (changed.status_code, changed.json()["order"], changed.json()["version"]) == (200, 5, 2)
    assert client.get(f"/api/policies/{pid}").json()["version"] == 2
    assert client.delete(f"/api/policies/{pid}").status_code == 204
    assert client.get(f"/api/policies/{pid}").status_code == 404
    actions = list(AuditEvent.objects.filter(action__startswith="policy.").values_list("action", flat=True))
    assert actions == ["policy.create", "policy.update", "policy.delete"]


@pytest.mark.parametrize("role", ["reviewer", "operator"])
def test_only_admins_manage_policies(role: str) -> None:
    client = api_as(role)
    Policy.objects.create(**SMALL)
    pid = Policy.objects.get().pk

    assert client.get("/api/policies").status_code == 403
    assert post(client, "/api/policies", SMALL).status_code == 403
    assert client.get(f"/api/policies/{pid}").status_code == 403
    assert (
        client.patch(f"/api/policies/{pid}", {"order": 1}, content_type="application/json").status_code == 403
    )
    assert client.delete(f"/api/policies/{pid}").status_code == 403
    assert Policy.objects.get().order == 100
    assert not AuditEvent.objects.exists()


def test_without_a_token_the_api_answers_401() -> None:
    assert Client().get("/api/policies").status_code == 401


def test_a_condition_that_does_not_compile_is_a_400_with_the_cel_error() -> None:
    client = api_as("admin")

    response = post(client, "/api/policies", {**SMALL, "when": "args.amount_cents <"})

    assert response.status_code == 400
    assert "CEL error" in response.json()["errors"]["when"]
    assert not Policy.objects.exists()


def test_a_bad_patch_changes_nothing() -> None:
    client = api_as("admin")
    pid = post(client, "/api/policies", SMALL).json()["id"]

    bad_when = client.patch(f"/api/policies/{pid}", {"when": "(("}, content_type="application/json")
    bad_field = client.patch(f"/api/policies/{pid}", {"colour": "red"}, content_type="application/json")
    bad_group = client.patch(f"/api/policies/{pid}", {"groups": ["nope"]}, content_type="application/json")
    missing = client.patch("/api/policies/999999", {"order": 1}, content_type="application/json")

    assert [r.status_code for r in (bad_when, bad_field, bad_group, missing)] == [400, 400, 400, 404]
    policy = Policy.objects.get()
    assert (policy.when, policy.version) == (SMALL["when"], 1)


def test_route_and_require_fields_round_trip() -> None:
    client = api_as("admin")
    make_user("sue", "reviewer", queues=("supervisors",))

    route = post(client, "/api/policies", {**SMALL, "name": "big", "action": "route", "queue": "supervisors"})
    two = post(
        client,
        "/api/policies",
        {**SMALL, "name": "two", "action": "require", "approvers": 2, "groups": ["supervisors-team"]},
    )

    assert route.json()["queue"] == "supervisors"
    assert (two.json()["approvers"], two.json()["groups"]) == (2, ["supervisors-team"])


def test_the_admin_refuses_a_condition_that_does_not_compile_and_audits_saves() -> None:
    ada = make_user("ada", "admin")
    ada.is_staff = True
    ada.save()
    client = Client()
    client.force_login(ada)
    form = {**SMALL, "agent": "", "queue": "", "approvers": 2, "message": "", "order": 100, "enabled": "on"}

    refused = client.post("/admin/approvals/policy/add/", {**form, "when": "args.amount_cents <"})
    assert refused.status_code == 200
    assert b"CEL error" in refused.content
    assert not Policy.objects.exists()

    saved = client.post("/admin/approvals/policy/add/", form)
    assert saved.status_code == 302, saved.content[:2000]
    pid = Policy.objects.get().pk
    client.post(f"/admin/approvals/policy/{pid}/change/", {**form, "when": "args.amount_cents < 100"})
    assert Policy.objects.get().version == 2
    update = AuditEvent.objects.get(action="policy.update")
    assert update.data["diff"] == {"when": ["args.amount_cents < 5000", "args.amount_cents < 100"]}
    assert AuditEvent.objects.get(action="policy.create").data["diff"]["when"] == [
        None,
        "args.amount_cents < 5000",
    ]

    client.post(f"/admin/approvals/policy/{pid}/delete/", {"post": "yes"})
    again = client.post("/admin/approvals/policy/add/", {**form, "name": "again"})
    assert again.status_code == 302
    bulk = {"action": "delete_selected", "_selected_action": [Policy.objects.get().pk], "post": "yes"}
    client.post("/admin/approvals/policy/", bulk)
    assert not Policy.objects.exists()
    deleted = AuditEvent.objects.filter(action="policy.delete").order_by("id")
    assert [e.data["policy"]["name"] for e in deleted] == [SMALL["name"], "again"]
    assert all(e.actor == ada for e in deleted)


def test_a_reviewer_with_staff_status_cannot_open_the_policy_admin() -> None:
    rita = make_user("rita", "reviewer")
    rita.is_staff = True
    rita.save()
    client = Client()
    client.force_login(rita)

    answer = client.get("/admin/approvals/policy/")
    # Not the admin role: Django admin sends it to its login page, as it would a stranger.
    assert answer.status_code == 302 and answer["Location"].startswith("/admin/login/")


def test_a_group_named_twice_is_stored_once_and_repeating_the_groups_changes_nothing() -> None:
    client = api_as("admin")
    Group.objects.create(name="sup")

    created = post(client, "/api/policies", {**SMALL, "groups": ["sup", "sup"]})
    pid = created.json()["id"]
    again = client.patch(f"/api/policies/{pid}", {"groups": ["sup", "sup"]}, content_type="application/json")

    assert (created.status_code, created.json()["groups"]) == (201, ["sup"])
    assert (again.status_code, again.json()["groups"], again.json()["version"]) == (200, ["sup"], 1)
    assert Policy.objects.get().version == 1
    assert list(AuditEvent.objects.values_list("action", flat=True)) == ["policy.create"]
    assert PreviewIn(id=pid, groups=["sup", "sup"]).groups == ["sup"]  # the preview sees what a save stores


def test_saving_the_same_groups_with_a_repeat_is_no_change_to_the_actions_either() -> None:
    Group.objects.create(name="sup")
    Group.objects.create(name="leads")
    policy = do_create_policy(actor=None, fields=SMALL, groups=["sup", "leads", "sup"])

    do_update_policy(policy.pk, actor=None, fields={}, groups=["leads", "sup", "leads"])

    policy.refresh_from_db()
    assert (sorted(g.name for g in policy.groups.all()), policy.version) == (["leads", "sup"], 1)
    assert not AuditEvent.objects.filter(action="policy.update").exists()
