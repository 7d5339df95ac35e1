"""A policy must name a tool some agent gates (and, if it names one, a registered agent): one for
a typo'd or ungated tool is tried at no gate, so it would be saved and silently never apply.
The API and the admin refuse it with a 400 naming the gated tools, and save nothing."""

from typing import Any

import pytest
from django.test import Client

from approvals.models import AuditEvent, Policy
from approvals.tests.test_policy_api import SMALL, api_as, post
from tests.factories import make_user

pytestmark = pytest.mark.django_db

GATED = "issue_refund, send_email"  # the shipped agents' gated tools


@pytest.mark.parametrize(
    ("target", "field", "error"),
    [
        (
            {"tool": "nope"},
            "tool",
            f"No agent gates a tool 'nope'. The gated tools: {GATED}. The interrupts of refunds_langgraph "
            "may ask about other actions: name the agent for a policy on one of those.",
        ),
        (
            {"tool": "lookup_order"},
            "tool",
            f"No agent gates a tool 'lookup_order'. The gated tools: {GATED}.",
        ),
        (
            {"agent": "refunds", "tool": "send_email"},
            "tool",
            "refunds gates no tool 'send_email'. Its gated tools: issue_refund.",
        ),
        ({"agent": "refunds_pydantic_ai", "tool": "nope"}, "tool", "Its gated tools: issue_refund."),
        ({"agent": "nope", "tool": "issue_refund"}, "agent", "No agent is named 'nope'. The agents: "),
    ],
    ids=["typo", "ungated", "another-agents", "framework-agents", "unknown-agent"],
)
def test_a_policy_for_a_tool_no_agent_gates_is_a_400_naming_the_gated_tools(
    target: dict[str, str], field: str, error: str
) -> None:
    client = api_as("admin")

    refused = post(client, "/api/policies", {**SMALL, **target})

    assert refused.status_code == 400, refused.content
    assert error in refused.json()["errors"][field]
    assert not Policy.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_langgraph_agents_interrupts_may_name_any_action_so_a_policy_naming_it_may_too() -> None:
    client = api_as("admin")

    created = post(client, "/api/policies", {**SMALL, "agent": "refunds_langgraph", "tool": "transfer_funds"})

    assert created.status_code == 201, created.content
    # ...and a gated tool of any agent needs no agent named.
    assert post(client, "/api/policies", {**SMALL, "name": "email", "tool": "send_email"}).status_code == 201


def test_a_change_to_an_unknown_tool_is_refused_but_a_retired_agents_policy_stays_editable() -> None:
    client = api_as("admin")
    pid = post(client, "/api/policies", SMALL).json()["id"]
    retired = Policy.objects.create(**{**SMALL, "name": "old", "agent": "retired", "tool": "old_tool"})

    def patch(policy_id: int, body: dict[str, Any]) -> Any:
        return client.patch(f"/api/policies/{policy_id}", body, content_type="application/json")

    renamed = patch(pid, {"tool": "issue_refnud"})
    assert renamed.status_code == 400, renamed.content
    assert f"The gated tools: {GATED}." in renamed.json()["errors"]["tool"]
    assert Policy.objects.get(pk=pid).tool == "issue_refund"
    # Saved before its agent was retired: switching it off still works.
    assert patch(retired.pk, {"enabled": False}).status_code == 200
    moved = patch(retired.pk, {"agent": "refunds"})  # but it cannot be moved onto a wrong tool
    assert moved.status_code == 400, moved.content
    assert (
        moved.json()["errors"]["tool"] == "refunds gates no tool 'old_tool'. Its gated tools: issue_refund."
    )


def test_the_admin_form_refuses_a_tool_no_agent_gates() -> None:
    ada = make_user("ada", "admin")
    ada.is_staff = True
    ada.save()
    client = Client()
    client.force_login(ada)
    form = {**SMALL, "agent": "", "queue": "", "approvers": 2, "message": "", "order": 100, "enabled": "on"}

    refused = client.post("/admin/approvals/policy/add/", {**form, "tool": "nope"})

    assert refused.status_code == 200
    assert "No agent gates a tool &#x27;nope&#x27;. The gated tools: issue_refund, send_email." in (
        refused.content.decode()
    )
    assert not Policy.objects.exists()
    assert client.post("/admin/approvals/policy/add/", form).status_code == 302
    retired = Policy.objects.create(**{**SMALL, "name": "old", "agent": "retired", "tool": "old_tool"})
    off = {**form, "name": "old", "agent": "retired", "tool": "old_tool", "enabled": ""}
    assert client.post(f"/admin/approvals/policy/{retired.pk}/change/", off).status_code == 302
    assert not Policy.objects.get(pk=retired.pk).enabled
