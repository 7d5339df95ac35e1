"""Input a fuzzing audit found answered with a 500 gets a clear 4xx that changes nothing: a
form in a charset Django refuses to read, a superscript digit where an id goes (socket query,
policy preview), a socket path no consumer serves, and a Django admin action on ids the primary
key cannot be. Through the middleware stack (Django's test client) and the ASGI application."""

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.core.exceptions import BadRequest
from django.test import Client, RequestFactory

from approvals.actions.tokens import do_create_token
from approvals.models import ApiToken, ApprovalRequest, AuditEvent, Policy
from checkpoints.models import Thread
from config import errors
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

LATIN1_FORM = "application/x-www-form-urlencoded; charset=latin-1"


def everything() -> list[Any]:
    return [
        list(Thread.objects.order_by("pk").values_list("pk", "status", "head_id")),
        list(ApprovalRequest.objects.order_by("pk").values_list("pk", "status", "claimed_by")),
        list(ApiToken.objects.order_by("pk").values_list("pk", "revoked_at")),
        list(Policy.objects.order_by("pk").values_list("pk", "version")),
        AuditEvent.objects.count(),
    ]


def admin_client() -> Client:
    client = Client()
    client.force_login(make_user("ada", "admin"))
    return client


@pytest.mark.parametrize("path", ["/", "/login/", "/threads/", "/api/threads", "/admin/approvals/policy/"])
@pytest.mark.parametrize("signed_in", [False, True], ids=["anonymous", "admin"])
def test_a_form_in_a_charset_other_than_utf8_is_a_400_on_every_path(path: str, signed_in: bool) -> None:
    make_gate()
    before = everything()
    client = admin_client() if signed_in else Client()
    client.cookies["csrftoken"] = "x" * 32  # the CSRF check reads the form: it raised there too

    response = client.post(path, "a=1", content_type=LATIN1_FORM)

    assert response.status_code == 400, (path, response.status_code)
    assert "must be UTF-8 encoded" in response.content.decode()
    assert everything() == before


@pytest.mark.parametrize("handler", [errors.bad_request, errors.server_error])
def test_the_error_pages_render_without_reading_a_body_django_refuses(handler: Any) -> None:
    # Django's own pages are wrapped in requires_csrf_token, which reads request.POST again.
    request = RequestFactory().post("/threads/", "a=1", content_type=LATIN1_FORM)
    request.COOKIES["csrftoken"] = "x" * 32

    response = (
        handler(request, BadRequest("unreadable")) if handler is errors.bad_request else handler(request)
    )

    assert response.status_code in (400, 500)
    assert "<h1>" in response.content.decode()


@pytest.mark.parametrize("value", ["²", "١٢", "9" * 30])
def test_an_id_that_is_not_ascii_digits_on_the_policy_preview_is_not_a_500(value: str) -> None:
    client = admin_client()
    before = everything()

    read = client.get("/policies/preview/", {"policy": value})
    previewed = client.post(
        "/policies/preview/",
        {"_preview_of": value, "name": "x", "tool": "issue_refund", "action": "approve", "when": "true"},
    )

    assert read.status_code < 500 and previewed.status_code < 500, (read.status_code, previewed.status_code)
    assert everything() == before


def connect(path: str, query: str = "", *, signed_in: bool = True) -> tuple[bool, Any]:
    from config.asgi import application

    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if signed_in:
        client = admin_client()
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))

    async def handshake() -> tuple[bool, Any]:
        communicator = WebsocketCommunicator(application, path, headers=headers)
        communicator.scope["query_string"] = query.encode()
        connected, code = await communicator.connect(timeout=5)
        if connected:
            await communicator.disconnect()
        return connected, code

    answer: tuple[bool, Any] = async_to_sync(handshake)()
    return answer


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("value", ["²", "١٢", "9" * 30])
def test_a_thread_socket_asked_for_a_request_id_that_is_not_ascii_digits_is_not_a_crash(
    value: str, in_memory_layer: Any
) -> None:
    gate = make_gate()

    connected, code = connect(f"/ws/threads/{gate.thread_id}/", f"request={value}")

    # An id no request has: the thread's page is served, no request's panel (as for any unknown id).
    assert connected, code


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/ws/nothing/", "/ws/", "/ws/inbox", "/"])
@pytest.mark.parametrize("signed_in", [False, True], ids=["anonymous", "admin"])
def test_a_socket_path_no_consumer_serves_is_refused_with_4404(
    path: str, signed_in: bool, in_memory_layer: Any
) -> None:
    assert connect(path, signed_in=signed_in) == (False, 4404)


ACTIONS = [
    ("approvals/approvalrequest", "release_claims"),
    ("approvals/apitoken", "revoke"),
    ("approvals/policy", "delete_selected"),
    ("approvals/queue", "delete_selected"),
    ("auth/user", "delete_selected"),
    ("auth/group", "delete_selected"),
    ("checkpoints/storeitem", "delete_selected"),
]


def test_every_admin_page_checks_the_ids_its_actions_are_given() -> None:
    from django.contrib import admin

    from config.admin_selection import CheckedSelection

    unchecked = [
        m._meta.label for m, a in admin.site._registry.items() if not isinstance(a, CheckedSelection)
    ]
    assert unchecked == []


@pytest.mark.parametrize(("page", "action"), ACTIONS)
@pytest.mark.parametrize("selected", ["zzz", "1.5", "9" * 30, "²"])
def test_an_admin_action_on_an_id_the_key_cannot_be_is_a_400_that_changes_nothing(
    page: str, action: str, selected: str
) -> None:
    gate = make_gate()
    ApprovalRequest.objects.filter(pk=gate.pk).update(claimed_by=make_user("rita", "reviewer"))
    do_create_token(user=make_user("olga", "operator"), name="ci")
    Policy.objects.create(name="p", tool="issue_refund", when="true", action="approve")
    client = admin_client()
    before = everything()

    response = client.post(f"/admin/{page}/", {"action": action, "_selected_action": [selected]})

    assert response.status_code == 400, response.status_code
    assert everything() == before
