"""HTML and JavaScript from the model, from tool arguments and from people are shown as text on
every page (inbox, decision, thread, checkpoint, diff, threads list, ledger, Django admin);
markdown descriptions go through the sanitizer."""

from html.parser import HTMLParser

import pytest
from django.test import Client

from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.threads import do_edit_state
from approvals.markdown import render_markdown
from approvals.models import ApprovalRequest, AuditEvent
from checkpoints.backends import get_backend
from checkpoints.models import ThreadStatus
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('xss-script')</script>"
IMG = "<img src=x onerror=alert('xss-img')>"
LINK = "[click me](javascript:alert('xss-link'))"
RAW_LINK = "<a href=\"javascript:alert('xss-a')\">x</a>"
PAYLOAD = f"{SCRIPT} {IMG} {LINK} {RAW_LINK}"


class Scan(HTMLParser):
    """Whatever in a page would run script: script elements with our marker, on* handlers,
    javascript: URLs. And the page's text, to check the payload was shown."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.active: list[str] = []
        self.text: list[str] = []
        self.in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.in_script = tag == "script"
        for name, value in attrs:
            value = (value or "").strip().lower()
            if name.startswith("on") and "xss" in value:
                self.active.append(f"<{tag} {name}={value}>")
            if name in ("href", "src", "action", "formaction") and value.startswith("javascript:"):
                self.active.append(f"<{tag} {name}={value}>")

    def handle_endtag(self, tag: str) -> None:
        self.in_script = False

    def handle_data(self, data: str) -> None:
        if self.in_script and "xss" in data:
            self.active.append(f"<script>{data}")
        self.text.append(data)


def scan(html: str) -> Scan:
    parser = Scan()
    parser.feed(html)
    return parser


@pytest.fixture
def hostile() -> ApprovalRequest:
    """An outreach thread whose user input, model output and email (free text its tool accepts)
    all carry the payload."""
    return make_gate(
        agent="outreach",
        action="send_email",
        args={"to": "ann@example.com", "subject": PAYLOAD, "body": f"Hello {PAYLOAD}"},
        user_input=f"Please email Ann {PAYLOAD}",
        model_text=f"Sure! {PAYLOAD}",
        description=PAYLOAD,
    )


def admin() -> Client:
    ada = make_user("ada", "admin")
    ada.is_staff = ada.is_superuser = True
    ada.save()
    client = Client()
    client.force_login(ada)
    return client


def test_hostile_text_is_shown_as_text_on_every_page(hostile: ApprovalRequest) -> None:
    client = admin()
    thread, cp = hostile.thread_id, hostile.checkpoint_id
    pages = {
        "inbox": "/",
        "decision": f"/approvals/{hostile.pk}/",
        "thread": f"/threads/{thread}/",
        "checkpoint": f"/threads/{thread}/checkpoints/{cp}/",
        "admin request": f"/admin/approvals/approvalrequest/{hostile.pk}/change/",
    }
    for name, path in pages.items():
        response = client.get(path)
        assert response.status_code == 200, name
        found = scan(response.content.decode())
        assert found.active == [], name
        assert "alert('xss-" in "".join(found.text), f"{name} does not show the payload at all"
    for path in (f"/threads/?q={SCRIPT}", "/admin/approvals/approvalrequest/"):  # no payload shown
        assert scan(client.get(path).content.decode()).active == []


def test_hostile_decisions_edits_and_their_ledger_and_diff_are_shown_as_text(
    hostile: ApprovalRequest,
) -> None:
    client = admin()
    from django.contrib.auth.models import User

    ada = User.objects.get(username="ada")
    do_decide(
        hostile, reviewer=ada, valid=check_decision(hostile, user=ada, decision="reject", message=PAYLOAD)
    )
    values = get_backend().get(thread_id=hostile.thread_id).values
    values["messages"][-1]["content"] = f"edited {PAYLOAD}"
    get_backend().set_status(thread_id=hostile.thread_id, status=ThreadStatus.PAUSED)
    do_edit_state(hostile.thread_id, user=ada, values=values)

    pages = {
        "diff": f"/threads/{hostile.thread_id}/diff/",
        "decision (decided)": f"/approvals/{hostile.pk}/",
        "thread": f"/threads/{hostile.thread_id}/",
        "ledger": "/ledger/",
        "admin ledger": f"/admin/approvals/auditevent/{AuditEvent.objects.latest('id').pk}/change/",
    }
    for name, path in pages.items():
        response = client.get(path)
        assert response.status_code == 200, name
        found = scan(response.content.decode())
        assert found.active == [], name
        assert "alert('xss-" in "".join(found.text), f"{name} does not show the payload at all"


def test_markdown_descriptions_keep_formatting_and_lose_scripts_and_javascript_links() -> None:
    html = str(render_markdown(f"Refund **$42.50** to `ORD-1001`. {PAYLOAD}"))

    found = scan(html)
    assert found.active == []
    assert "<strong>$42.50</strong>" in html and "<code>ORD-1001</code>" in html
    assert "<script" not in html and "<img" not in html and '<a href="javascript' not in html
