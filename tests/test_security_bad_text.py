"""Text no column can store — a NUL character, a lone UTF-16 surrogate — gets a clear 400 (a
refused handshake on a socket) wherever it comes in: path, query, form field, JSON body."""

import html
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, AuditEvent
from checkpoints.models import Checkpoint, Thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def everything() -> list[Any]:
    return [
        list(Thread.objects.order_by("pk").values_list("pk", "status", "head_id")),
        list(ApprovalRequest.objects.order_by("pk").values_list("pk", "status", "decision_args")),
        Checkpoint.objects.count(),
        AuditEvent.objects.count(),
    ]


def admin_user() -> Any:
    ada = make_user("ada", "admin")
    ada.is_staff = ada.is_superuser = True
    ada.save()
    return ada


API_CASES = [
    ("get", "/api/threads?q=%00", None, "the query parameter 'q'"),
    ("get", "/api/threads?agent=%00", None, "the query parameter 'agent'"),
    ("get", "/api/threads?decided_by=%00", None, "the query parameter 'decided_by'"),
    ("get", "/api/approvals?queue=%00", None, "the query parameter 'queue'"),
    ("get", "/api/threads/a%00b", None, "the path"),
    ("get", "/api/threads/{thread}/diff?from=%00", None, "the query parameter 'from'"),
    ("post", "/api/threads", {"agent": "refunds", "input": "x \ud800"}, "body.input"),
    ("post", "/api/threads", {"agent": "refunds", "input": "x \u0000"}, "body.input"),
    ("post", "/api/threads", {"agent": "refunds", "input": "hi", "thread_id": "a\u0000"}, "body.thread_id"),
    ("post", "/api/approvals/{pk}/decision", {"decision": "reject", "message": "\udc00"}, "body.message"),
    ("post", "/api/approvals/{pk}/decision", {"decision": "reject", "message": "no\u0000"}, "body.message"),
    (
        "post",
        "/api/approvals/{pk}/decision",
        {"decision": "edit", "args": {"order_id": "O\u0000", "amount_cents": 5}},
        "body.args.order_id",
    ),
    ("post", "/api/approvals/{pk}/claim", {"op": "reassign", "to": "\ud800"}, "body.to"),
    (
        "patch",
        "/api/threads/{thread}/state",
        {"values": {"messages": [{"role": "user", "content": "\u0000"}]}},
        "body.values.messages[0].content",
    ),
    ("patch", "/api/threads/{thread}/state", {"values": {"\ud800": 1}}, "the key 'body.values.\\ud800'"),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "where"), API_CASES, ids=[f"{m} {p} {b}" for m, p, b, _ in API_CASES]
)
def test_a_nul_or_a_lone_surrogate_anywhere_in_an_api_request_is_a_clear_400_naming_where(
    method: str, path: str, body: Any, where: str
) -> None:
    gate = make_gate()
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=admin_user())}"})
    path = path.format(thread=gate.thread_id, pk=gate.pk)
    before = everything()

    if body is None:
        response = api.get(path)
    else:
        response = getattr(api, method)(path, json.dumps(body), content_type="application/json")

    assert response.status_code == 400
    assert response.json()["detail"].startswith(f"Refused: {where} contains a")
    assert everything() == before


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_a_json_body_sent_under_another_type_is_checked_too(content_type: str) -> None:
    # django-ninja reads a body as JSON whatever its type says; `curl -d` sends a form type.
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=admin_user())}"})
    before = everything()

    body = json.dumps({"agent": "refunds", "input": "x \ud800"})
    response = api.post("/api/threads", body, content_type=content_type)

    assert response.status_code == 400
    assert response.json()["detail"].startswith("Refused: body.input contains a")
    assert everything() == before


UNREADABLE_BODIES = [
    ("[" * 5000 + "]" * 5000, "nests deeper than 100 levels"),  # Python's parser: RecursionError
    ('{"agent": "refunds", "input": ' + "[" * 101 + "]" * 101 + "}", "nests deeper than 100 levels"),
    ('{"agent": "refunds", "input": "hi", "tenant": NaN}', "NaN is not a JSON number"),
    ('{"agent": "refunds", "input": "hi", "x": 1e999}', "1e999 is not a JSON number"),
    ('{"agent": "refunds", "input": ' + "9" * 4301 + "}", "Exceeds the limit (4300 digits)"),
]


@pytest.mark.parametrize(("body", "said"), UNREADABLE_BODIES)
@pytest.mark.parametrize("path", ["/api/threads", "/langgraph/threads", "/login/", "/healthz"])
def test_a_json_body_no_view_could_read_is_a_clear_400_before_any_login(
    body: str, said: str, path: str
) -> None:
    before = everything()

    response = Client().post(path, body, content_type="text/plain")

    assert response.status_code == 400
    api = path.startswith(("/api", "/langgraph"))
    assert response["Content-Type"] == ("application/json" if api else "text/plain; charset=utf-8")
    detail = response.json()["detail"] if api else response.content.decode()
    assert detail.startswith("Refused: the body cannot be read:") and said in detail
    assert everything() == before


def test_a_multipart_form_sent_to_the_json_api_is_a_4xx_that_changes_nothing() -> None:
    # The form was read from the stream, so the API found no body to read: a 500.
    request_ = make_gate()
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=admin_user())}"})
    before = everything()

    for path, form in [
        (f"/api/approvals/{request_.pk}/claim", {"op": "claim"}),
        (f"/api/approvals/{request_.pk}/decision", {"decision": "approve"}),
        ("/api/threads", {"agent": "refunds", "input": "hi"}),
        ("/api/policies", {"name": "p", "tool": "issue_refund", "when": "true", "action": "approve"}),
    ]:
        response = api.post(path, form)  # the test client's default: multipart/form-data
        assert 400 <= response.status_code < 500 and response.json()["detail"], (path, response.content)
    assert everything() == before


PAGE_CASES = [
    ("get", "/threads/a%00b/", None, "the path"),
    ("get", "/threads/a%00b/diff/", None, "the path"),
    ("get", "/threads/?q=%00", None, "the query parameter 'q'"),
    ("get", "/?agent=%00", None, "the query parameter 'agent'"),
    ("post", "/approvals/{pk}/", {"decision": "reject", "message": "a\x00b"}, "the field 'message'"),
    ("post", "/threads/", {"agent": "refunds", "input": "a\x00b"}, "the field 'input'"),
    ("post", "/threads/{thread}/messages/", {"input": "a\x00b"}, "the field 'input'"),
]


@pytest.mark.parametrize(("method", "path", "body", "where"), PAGE_CASES)
def test_a_nul_in_a_page_path_query_or_form_field_is_a_clear_400_naming_where(
    method: str, path: str, body: Any, where: str
) -> None:
    gate = make_gate()
    page = Client()
    page.force_login(admin_user())
    before = everything()

    path = path.format(thread=gate.thread_id, pk=gate.pk)
    response = page.get(path) if body is None else page.post(path, body)

    assert response.status_code == 400
    assert f"Refused: {where} contains a NUL character." in html.unescape(response.content.decode())
    assert everything() == before


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/ws/threads/a\x00b/", "/ws/threads/\ud800/", "/ws/inbox/?agent=%00"])
def test_a_socket_path_with_a_nul_or_a_lone_surrogate_is_refused_at_the_handshake(
    path: str, in_memory_layer: Any
) -> None:
    from config.asgi import application

    client = Client()
    client.force_login(admin_user())
    path, _, query = path.partition("?")
    headers = [
        (b"origin", b"http://127.0.0.1"),
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
    ]

    async def connect() -> tuple[bool, Any]:
        communicator = WebsocketCommunicator(
            application, path + ("?" + query if query else ""), headers=headers
        )
        communicator.scope["query_string"] = query.encode()
        answer = await communicator.connect(timeout=5)
        await communicator.wait()
        return answer

    connected, code = async_to_sync(connect)()

    assert (connected, code) == (False, 4400)
