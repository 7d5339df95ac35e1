"""Preview a policy before saving it: the last N requests of its tool, decided by the whole
ordered policy set with the candidate in place, next to what happened. Nothing is saved."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from agents.runtime import RESULT_PREFIX
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.policies import do_create_policy
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, AuditEvent, Policy
from checkpoints.backends import get_backend
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def api_as(*roles: str, name: str = "ada") -> Client:
    user = make_user(name, *roles)
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=user)}"})


def preview(client: Client, body: dict[str, Any]) -> Any:
    return client.post("/api/policies/preview", body, content_type="application/json")


def refund(cents: int) -> ApprovalRequest:
    return make_gate(args={"order_id": "ORD-1001", "amount_cents": cents})


def approve(request_: ApprovalRequest, *, by: str) -> None:
    reviewer = make_user(by, "reviewer")
    valid = check_decision(request_, user=reviewer, decision="approve", args=None, message="")
    do_decide(request_, reviewer=reviewer, valid=valid)


def test_preview_lists_the_requests_a_new_policy_would_decide_differently() -> None:
    client = api_as("admin")
    small, large = refund(1200), refund(90000)
    approve(small, by="rita")

    answer = preview(
        client,
        {
            "name": "small refunds",
            "tool": "issue_refund",
            "when": "args.amount_cents < 5000",
            "action": "approve",
        },
    )

    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["considered"] == 2
    assert [(r["request_id"], r["happened"], r["result"], r["would"]) for r in body["changed"]] == [
        (small.pk, "to a person", "approved by rita", "approved automatically by 'small refunds' v1")
    ]
    assert body["counts"] == {"approved automatically": 1, "to a person": 1}
    assert large.pk not in [r["request_id"] for r in body["changed"]]
    assert not Policy.objects.exists()
    assert not AuditEvent.objects.filter(action__startswith="policy.").exists()


def test_preview_decides_with_the_whole_ordered_set_around_the_candidate() -> None:
    client = api_as("admin")
    do_create_policy(
        actor=None,
        fields={
            "name": "deny huge",
            "tool": "issue_refund",
            "when": "args.amount_cents > 100000",
            "action": "deny",
            "order": 10,
        },
    )
    huge, big = refund(150000), refund(60000)

    # Every refund to supervisors, after 'deny huge' (order 10): only the one it leaves changes.
    body = preview(
        client,
        {"name": "all", "tool": "issue_refund", "action": "route", "queue": "supervisors", "order": 50},
    ).json()
    assert [(r["request_id"], r["would"]) for r in body["changed"]] == [
        (big.pk, "routed to supervisors by 'all' v1")
    ]

    # Before it (order 1), it takes the huge one too.
    body = preview(
        client, {"name": "all", "tool": "issue_refund", "action": "route", "queue": "supervisors", "order": 1}
    ).json()
    assert sorted(r["request_id"] for r in body["changed"]) == sorted([huge.pk, big.pk])
    assert {r["happened"] for r in body["changed"]} == {
        "to a person",
        "denied automatically by 'deny huge' v1",
    }


def test_preview_marks_rows_another_policy_decides_now() -> None:
    client = api_as("admin")
    small, large = refund(1200), refund(60000)
    do_create_policy(
        actor=None,
        fields={"name": "big", "tool": "issue_refund", "when": "args.amount_cents > 50000", "action": "deny"},
    )

    body = preview(
        client, {"tool": "issue_refund", "when": "args.amount_cents < 5000", "action": "approve"}
    ).json()

    assert sorted((r["request_id"], r["by_candidate"]) for r in body["changed"]) == [
        (small.pk, True),
        (large.pk, False),
    ]


def test_preview_of_an_existing_policy_with_changes_counts_only_different_decisions() -> None:
    client = api_as("admin")
    small = do_create_policy(
        actor=None,
        fields={
            "name": "small refunds",
            "tool": "issue_refund",
            "when": "args.amount_cents < 5000",
            "action": "approve",
        },
    )
    refund(1200)
    mid = refund(7000)

    body = preview(client, {"id": small.pk, "when": "args.amount_cents < 10000"}).json()

    # The 1200 refund stays approved (by v2 now: the same decision); the 7000 one changes.
    assert [(r["request_id"], r["happened"], r["would"]) for r in body["changed"]] == [
        (mid.pk, "to a person", "approved automatically by 'small refunds' v2")
    ]
    assert Policy.objects.get().when == "args.amount_cents < 5000"

    disabled = preview(client, {"id": small.pk, "enabled": False}).json()
    assert [r["would"] for r in disabled["changed"]] == ["to a person"]


def test_preview_looks_at_the_last_n_requests_of_the_policys_agent_and_tool() -> None:
    client = api_as("admin")
    refunds = [refund(100 + i) for i in range(3)]
    email = {"to": "a@example.com", "subject": "s", "body": "b"}
    make_gate(agent="outreach", action="send_email", args=email)

    body = preview(client, {"tool": "issue_refund", "action": "deny", "limit": 2}).json()

    assert body["considered"] == 2
    assert [r["request_id"] for r in body["changed"]] == [refunds[2].pk, refunds[1].pk]
    assert (
        preview(client, {"tool": "issue_refund", "agent": "other", "action": "deny"}).json()["considered"]
        == 0
    )


def test_a_bad_condition_is_a_400_with_the_cel_error_and_nothing_is_saved() -> None:
    client = api_as("admin")

    answer = preview(client, {"tool": "issue_refund", "when": "args.amount_cents <", "action": "approve"})

    assert answer.status_code == 400
    assert "CEL error" in answer.json()["errors"]["when"]
    assert preview(client, {"tool": "issue_refund", "action": "route"}).status_code == 400  # no queue
    assert preview(client, {"action": "approve"}).status_code == 400  # no tool
    assert preview(client, {"id": 999999}).status_code == 404
    assert (
        preview(client, {"tool": "issue_refund", "action": "require", "groups": ["nope"]}).status_code == 400
    )
    assert not Policy.objects.exists()


@pytest.mark.parametrize("role", ["reviewer", "operator"])
def test_only_admins_preview_policies(role: str) -> None:
    assert preview(api_as(role), {"tool": "issue_refund", "action": "approve"}).status_code == 403


def admin_client() -> Client:
    ada = make_user("ada", "admin")
    ada.is_staff = True
    ada.save()
    client = Client()
    client.force_login(ada)
    return client


FORM = {
    **{"name": "small refunds", "agent": "", "tool": "issue_refund", "when": "args.amount_cents < 5000"},
    **{"action": "approve", "queue": "", "approvers": 2, "message": "", "order": 100, "enabled": "on"},
}


def test_the_policy_admin_form_has_a_preview_button_posting_to_the_preview_page() -> None:
    client = admin_client()
    pid = do_create_policy(actor=None, fields={k: v for k, v in FORM.items() if k != "enabled"}).pk

    page = client.get(f"/admin/approvals/policy/{pid}/change/").content.decode()

    assert 'formaction="/policies/preview/" formtarget="_blank"' in page  # in a new tab
    assert f'name="_preview_of" value="{pid}"' in page
    assert 'name="_preview_of" value=""' in client.get("/admin/approvals/policy/add/").content.decode()


def test_the_preview_page_shows_the_changed_requests_of_the_unsaved_admin_form() -> None:
    client = admin_client()
    small = refund(1200)
    refund(90000)

    page = client.post("/policies/preview/", {**FORM, "_preview_of": ""})

    assert page.status_code == 200
    html = page.content.decode()
    assert "Nothing has been saved." in html
    assert f'data-request="{small.pk}"' in html
    assert "approved automatically by &#x27;small refunds&#x27; v1" in html
    assert "<strong>1</strong> would have been decided differently" in html
    assert not Policy.objects.exists()


def test_the_preview_page_of_a_changed_policy_leaves_it_as_it_was() -> None:
    client = admin_client()
    pid = do_create_policy(actor=None, fields={k: v for k, v in FORM.items() if k != "enabled"}).pk
    mid = refund(7000)

    html = client.post(
        "/policies/preview/", {**FORM, "when": "args.amount_cents < 10000", "_preview_of": str(pid)}
    ).content.decode()

    assert f'data-request="{mid.pk}"' in html
    assert "v2" in html
    assert Policy.objects.get().when == "args.amount_cents < 5000"
    assert client.get(f"/policies/preview/?policy={pid}").status_code == 200
    assert client.get("/policies/preview/?policy=999999").status_code == 404


def test_the_preview_page_shows_a_bad_condition_as_a_400_with_the_cel_error() -> None:
    page = admin_client().post("/policies/preview/", {**FORM, "when": "args.amount_cents <"})

    assert page.status_code == 400
    assert "CEL error" in page.content.decode()


def test_the_preview_page_is_for_admins_only() -> None:
    client = Client()
    client.force_login(make_user("rita", "reviewer"))

    assert client.post("/policies/preview/", FORM).status_code == 403


def test_the_preview_of_a_saved_policy_names_the_version_in_force() -> None:
    client = admin_client()
    earlier = refund(1200)  # raised before the policy: it went to a person
    policy = do_create_policy(actor=None, fields={k: v for k, v in FORM.items() if k != "enabled"})

    html = client.get(f"/policies/preview/?policy={policy.pk}").content.decode()
    unchanged = client.post("/policies/preview/", {**FORM, "_preview_of": str(policy.pk)}).content.decode()

    # Nothing changes on a save of the policy as it is, its version included.
    for page in (html, unchanged):
        assert f'data-request="{earlier.pk}"' in page
        assert "approved automatically by &#x27;small refunds&#x27; v1" in page


def test_preview_decides_each_request_with_the_effects_done_before_it_and_now_its_time() -> None:
    client = api_as("admin")
    first = refund(2000)
    approve(first, by="rita")
    get_backend().put_write(  # the approved refund ran: an effect, from now on
        thread_id=first.thread_id,
        checkpoint_id=str(first.checkpoint_id),
        task_id=RESULT_PREFIX + first.key,
        kind="result",
        value="refunded",
    )
    later = ApprovalRequest.objects.create(
        **{
            f: getattr(first, f)
            for f in ("thread_id", "checkpoint_id", "agent", "action", "allowed_decisions")
        },
        key="call_second",
        args={"order_id": "ORD-1001", "amount_cents": 2500},
        state_digest=first.state_digest,
    )
    ApprovalRequest.objects.filter(pk=first.pk).update(created_at=datetime(2020, 6, 1, tzinfo=UTC))

    def would(when: str) -> dict[int, str]:
        body = preview(client, {"name": "p", "tool": "issue_refund", "when": when, "action": "deny"}).json()
        return {r["request_id"]: r["would"] for r in body["changed"]}

    # The first refund's gate saw no refund done yet; the later one saw the first.
    assert would("effects.count == 0") == {first.pk: "denied automatically by 'p' v1"}
    assert would("effects.count == 1 && effects.sum.amount_cents == 2000") == {
        later.pk: "denied automatically by 'p' v1"
    }
    cutoff = (datetime(2020, 6, 1, tzinfo=UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert would(f"now < timestamp('{cutoff}')") == {first.pk: "denied automatically by 'p' v1"}


def test_the_preview_page_shows_each_argument_on_its_own_line_not_as_json() -> None:
    client = admin_client()
    small = refund(1200)

    html = client.post("/policies/preview/", {**FORM, "_preview_of": ""}).content.decode()

    assert f'data-request="{small.pk}"' in html
    assert '<dt>Order id</dt><dd class="value-text">ORD-1001</dd>' in html
    assert '<dt>Amount cents</dt><dd class="value-text">1200</dd>' in html
    assert "&quot;order_id&quot;" not in html and "{ " not in html


def test_the_preview_page_says_a_request_not_decided_yet_is_still_pending() -> None:
    client = admin_client()
    waiting, decided = refund(1200), refund(1300)
    approve(decided, by="rita")

    html = client.post("/policies/preview/", {**FORM, "_preview_of": ""}).content.decode()

    assert f'data-request="{waiting.pk}"' in html and f'data-request="{decided.pk}"' in html
    assert '<td data-label="Ended">still pending</td>' in html
    assert '<td data-label="Ended">approved by rita</td>' in html
    assert '<td data-label="Ended">pending</td>' not in html


def test_the_note_on_rows_another_policy_decides_shows_only_when_one_is_marked() -> None:
    client = admin_client()
    refund(1200)

    alone = client.post("/policies/preview/", {**FORM, "_preview_of": ""}).content.decode()
    assert "<strong>1</strong> would have been decided differently" in alone
    assert "another policy" not in alone

    refund(60000)
    do_create_policy(
        actor=None,
        fields={"name": "big", "tool": "issue_refund", "when": "args.amount_cents > 50000", "action": "deny"},
    )
    marked = client.post("/policies/preview/", {**FORM, "_preview_of": ""}).content.decode()
    assert ">another policy</span>" in marked
    assert "Rows marked “another policy” change" in marked


def test_the_preview_page_with_errors_says_to_fix_them_in_the_form_not_to_save() -> None:
    html = admin_client().post("/policies/preview/", {**FORM, "when": "args.amount_cents <"}).content.decode()

    assert "Fix this in the admin form, then preview again." in html
    assert "press Save" not in html


def test_the_preview_page_of_a_tool_never_asked_says_there_is_nothing_to_compare() -> None:
    html = admin_client().post("/policies/preview/", {**FORM, "_preview_of": ""}).content.decode()

    assert 'No requests of <code class="tool-name">issue_refund</code> yet: nothing to compare.' in html
    assert "Of the last 0 requests" not in html
    assert "no requests yet" not in html
