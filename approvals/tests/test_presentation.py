"""Gated calls as people read them: the tool's summary and preview, plain-language field errors,
and tools that refuse their own bad arguments before any reviewer is asked."""

import re

import pytest
from django.test import Client

from agents.examples.agents import issue_refund
from agents.tools import Approval, ToolArgumentsError
from approvals import presentation
from approvals.models import ApprovalRequest
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

EMAIL = {"to": "grace@example.com", "subject": "Q3 roadmap", "body": "Hi Grace,\n\nSee you Monday.\nAda"}


def logged_in(username: str, role: str) -> Client:
    client = Client()
    client.force_login(make_user(username, role))
    return client


def test_a_refund_reads_as_money_to_the_customer() -> None:
    line = presentation.summary(
        agent="refunds", action="issue_refund", args={"order_id": "ORD-1002", "amount_cents": 12999}
    )
    assert line == "Refund $129.99 to Grace Hopper (order ORD-1002)"


def test_a_tool_without_a_summary_gets_a_generic_line_from_its_arguments() -> None:
    line = presentation.summary(agent="unknown-agent", action="delete_user", args={"user_id": 7})
    assert line == "Delete user · user id 7"


def test_an_email_preview_shows_subject_and_body_with_its_line_breaks() -> None:
    html = str(presentation.preview(agent="outreach", action="send_email", args=EMAIL))
    assert "email-preview" in html and "<strong>Q3 roadmap</strong>" in html
    assert "Hi Grace,\n\nSee you Monday." in html and "\\n" not in html


def test_the_generic_preview_escapes_and_keeps_text_as_written() -> None:
    html = str(presentation.preview(agent="nope", action="post", args={"text": "<b>hi</b>\nthere"}))
    assert "&lt;b&gt;hi&lt;/b&gt;\nthere" in html


def test_a_render_function_returns_markdown_shown_through_the_sanitizer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def render(args: dict[str, object]) -> str:
        return f"**Refund** of {args['amount_cents']} cents <script>alert(1)</script>"

    monkeypatch.setattr(presentation, "gate_approval", lambda **_: Approval(render=render))

    html = presentation.preview(agent="refunds", action="issue_refund", args={"amount_cents": 4250})

    assert html.startswith('<div class="preview">') and "<strong>Refund</strong> of 4250 cents" in html
    assert "<script>" not in html


def test_inbox_rows_show_the_summary_and_the_threads_first_message() -> None:
    make_gate(
        args={"order_id": "ORD-1002", "amount_cents": 12999}, user_input="My mug arrived broken, ORD-1002"
    )

    html = logged_in("rita", "reviewer").get("/").content.decode()

    assert "Refund $129.99 to Grace Hopper (order ORD-1002)" in html
    assert "My mug arrived broken, ORD-1002" in html
    assert "amount_cents=12999" not in html


def test_the_decision_page_shows_the_email_as_an_email() -> None:
    request_ = make_gate(agent="outreach", action="send_email", args=EMAIL, user_input="Email Grace")

    html = logged_in("rita", "reviewer").get(f"/approvals/{request_.pk}/").content.decode()

    assert re.search(r"<h1>Email grace@example.com: “Q3 roadmap”</h1>", html)
    assert '<div class="email-body">Hi Grace,\n\nSee you Monday.\nAda</div>' in html


def test_an_invalid_edit_is_refused_in_plain_language() -> None:
    request_ = make_gate()

    response = logged_in("rita", "reviewer").post(
        f"/approvals/{request_.pk}/",
        {"decision": "edit", "args.order_id": "ORD-1001", "args.amount_cents": "0"},
    )

    assert response.status_code == 400
    assert "Amount must be greater than 0" in response.content.decode()
    assert "Input should be" not in response.content.decode()
    assert ApprovalRequest.objects.get(pk=request_.pk).status == "pending"


@pytest.mark.parametrize("order_id", ["", "   "])
def test_a_refund_refuses_an_empty_order_id(order_id: str) -> None:
    with pytest.raises(ToolArgumentsError) as excinfo:
        issue_refund.validate_args({"order_id": order_id, "amount_cents": 500})

    assert excinfo.value.errors == {"order_id": "Order id must not be empty"}


def test_the_conversation_shows_an_email_body_with_line_breaks_not_json_escapes() -> None:
    request_ = make_gate(agent="outreach", action="send_email", args=EMAIL, user_input="Email Grace")

    html = logged_in("rita", "reviewer").get(f"/threads/{request_.thread_id}/").content.decode()

    assert "body:\n  Hi Grace,\n  \n  See you Monday.\n  Ada" in html
    assert "Hi Grace,\\n" not in html
