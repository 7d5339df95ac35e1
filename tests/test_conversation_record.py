"""The conversation pane as the record of what was decided: an edited call shows the arguments
approved (the proposal struck through), and gated calls of every runtime carry their status,
LangGraph's too (its requests are keyed by interrupt, not by call)."""

import re

import pytest
from django.test import Client

from approvals.models import ApprovalRequest
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def logged_in(username: str, role: str) -> Client:
    client = Client()
    client.force_login(make_user(username, role))
    return client


def calls_of(html: str) -> list[str]:
    """The conversation's tool calls, each as its HTML."""
    pane = html[html.index('<ol class="conversation">') :]
    pane = pane[: pane.index("</ol>")]
    return pane.split('<div class="tool-call">')[1:]


def test_an_edited_call_shows_the_approved_arguments_and_strikes_the_proposed() -> None:
    request_ = make_gate(args={"order_id": "ORD-1002", "amount_cents": 12999})
    reviewer = logged_in("rita", "reviewer")
    reviewer.post(
        f"/approvals/{request_.pk}/",
        {"decision": "edit", "args.order_id": "ORD-1002", "args.amount_cents": "10000"},
    )
    assert ApprovalRequest.objects.get(pk=request_.pk).status == "edited"

    html = reviewer.get(f"/threads/{request_.thread_id}/").content.decode()

    (call,) = calls_of(html)
    assert "edited by rita" in call
    shown = re.search(r'<pre class="args">(.*?)</pre>', call, re.S)
    assert shown is not None and shown.group(1) == "order_id: ORD-1002\namount_cents: 10000"
    assert "<del>order_id: ORD-1002\namount_cents: 12999</del>" in call


def test_an_approved_call_shows_its_arguments_once() -> None:
    request_ = make_gate(args={"order_id": "ORD-1002", "amount_cents": 12999})
    reviewer = logged_in("rita", "reviewer")
    reviewer.post(f"/approvals/{request_.pk}/", {"decision": "approve"})

    (call,) = calls_of(reviewer.get(f"/threads/{request_.thread_id}/").content.decode())

    assert "approved by rita" in call and "<del>" not in call
    assert call.count("amount_cents: 12999") == 1


def as_langgraph(request_: ApprovalRequest, *, key: str) -> ApprovalRequest:
    """The request keyed as the LangGraph adapter keys its gates: interrupt id and index."""
    ApprovalRequest.objects.filter(pk=request_.pk).update(key=key)
    return ApprovalRequest.objects.get(pk=request_.pk)


def test_a_langgraph_threads_gated_call_shows_its_status() -> None:
    request_ = as_langgraph(make_gate(), key="5f0c1e2a-interrupt:0")
    admin = logged_in("olga", "admin")

    (pending,) = calls_of(admin.get(f"/threads/{request_.thread_id}/").content.decode())
    admin.post(f"/approvals/{request_.pk}/", {"decision": "approve"})
    (approved,) = calls_of(admin.get(f"/threads/{request_.thread_id}/").content.decode())

    assert 'class="tag decision-pending">pending' in pending
    assert 'class="tag decision-approved">approved by olga' in approved
