"""Pages an admin and an operator read: the ledger as diffs with links, the thread list with what
each thread is about, what waits in it and when it last moved."""

import json

import pytest
from django.test import Client

from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.policies import do_create_policy, do_update_policy
from approvals.actions.threads import do_control, do_edit_state, do_fork_thread
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def logged_in(username: str, role: str) -> Client:
    client = Client()
    client.force_login(make_user(username, role))
    return client


def test_the_ledger_shows_a_fork_as_a_readable_diff_with_links_to_its_checkpoints() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate(user_input="Please refund order ORD-1001 " + "because it broke " * 20)
    first = Checkpoint.objects.get(thread_id=request_.thread_id, step=0)
    values = get_backend().get(thread_id=request_.thread_id, checkpoint_id=str(first.pk)).values
    values["messages"][0]["content"] = "Please refund order ORD-1003"
    written = do_fork_thread(request_.thread_id, user=olga, checkpoint_id=str(first.pk), values=values)

    html = logged_in("ada", "admin").get("/ledger/").content.decode()

    thread = request_.thread_id
    assert f'href="/threads/{thread}/checkpoints/{written.checkpoint.id}/"' in html
    assert f'href="/threads/{thread}/checkpoints/{first.pk}/"' in html  # "forked from"
    assert '<code class="path">messages[0].content</code>' in html
    assert "<ins>Please refund order ORD-1003</ins>" in html
    assert "because it broke because it broke" in html  # the old text is not cut to 160 characters
    assert '{"changes"' not in html and "[{&quot;" not in html


def test_the_compare_page_and_the_ledger_name_the_argument_an_edit_changed() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()  # issue_refund {"order_id": "ORD-1001", "amount_cents": 4250}
    values = get_backend().get(thread_id=request_.thread_id).values
    values["messages"][-1]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        {"order_id": "ORD-1001", "amount_cents": 3000}
    )
    edited = do_edit_state(request_.thread_id, user=olga, values=values).checkpoint.id
    admin = logged_in("ada", "admin")
    path = "messages[1].tool_calls[0].function.arguments.amount_cents"

    compare = admin.get(
        f"/threads/{request_.thread_id}/diff/?from={request_.checkpoint_id}&to={edited}"
    ).content.decode()
    ledger = admin.get("/ledger/").content.decode()

    assert f"<td><code>{path.replace('.', '.<wbr>')}</code></td>" in compare  # it wraps at its dots
    assert '<td class="before"><pre>4250</pre></td><td class="after"><pre>3000</pre></td>' in compare
    assert "ORD-1001" not in compare  # only the field that changed, not the whole arguments
    assert f'<code class="path">{path}</code>' in ledger


def test_the_ledger_names_the_argument_a_reviewer_edited() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate()  # issue_refund {"order_id": "ORD-1001", "amount_cents": 4250}
    edit = {"order_id": "ORD-1001", "amount_cents": 3000}
    do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="edit", args=edit))

    html = logged_in("ada", "admin").get("/ledger/").content.decode()

    assert "Arguments changed" in html
    assert (
        '<li class="diff-changed"><code class="path">amount_cents</code> <del>4250</del> → <ins>3000</ins>'
        in html
    )


def test_the_ledger_shows_a_policy_change_as_old_to_new_by_field() -> None:
    ada = make_user("ada", "admin")
    admin = Client()
    admin.force_login(ada)
    fields = {
        "name": "small",
        "tool": "issue_refund",
        "when": "args.amount_cents < 5000",
        "action": "approve",
    }
    made = do_create_policy(actor=ada, fields=fields)
    do_update_policy(made.pk, actor=ada, fields={"when": "args.amount_cents < 2000"})

    html = admin.get("/ledger/").content.decode()

    old, new = "<del>args.amount_cents &lt; 5000</del>", "<ins>args.amount_cents &lt; 2000</ins>"
    changed = f'<code class="path">when</code> {old} → {new}'
    assert changed in html
    assert '<code class="path">name</code> added <ins>small</ins>' in html  # the create
    assert '<code class="path">queue</code>' not in html  # a field left empty is no change
    assert "&#x27;small&#x27; v2" in html  # the policy by name and version, not as JSON
    assert "&quot;when&quot;" not in html  # not the diff as JSON text


def test_the_thread_list_shows_the_first_message_pending_count_and_last_activity() -> None:
    make_gate(user_input="My order ORD-1002 arrived broken")

    html = logged_in("olga", "operator").get("/threads/").content.decode()

    assert "My order ORD-1002 arrived broken" in html
    assert '<span class="tag pending-count">1 pending</span>' in html
    assert "just now" in html and "0 minutes ago" not in html


def test_a_paused_thread_says_who_paused_it() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    do_control(request_.thread_id, user=olga, verb="pause")

    html = logged_in("otto", "operator").get(f"/threads/{request_.thread_id}/").content.decode()

    assert "Paused by <strong>olga</strong>" in html
