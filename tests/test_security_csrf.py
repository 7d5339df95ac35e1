"""CSRF on every state-changing form and htmx request; session cookies ready for HTTPS; API tokens
hashed at rest and revocable; the API takes no session cookie (so it needs no CSRF token)."""

import json

import pytest
from django.test import Client
from django.utils import timezone

from approvals.actions.tokens import do_create_token, do_revoke_token
from approvals.models import ApiToken, ApprovalRequest
from checkpoints.backends import get_backend
from tests.factories import make_gate, make_user, settings_read_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def gate() -> ApprovalRequest:
    return make_gate()


def admin_client(*, csrf: bool = True) -> Client:
    admin = make_user("ada", "admin")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(admin)
    return client


def forms(gate: ApprovalRequest) -> list[tuple[str, dict[str, str]]]:
    thread, cp = gate.thread_id, gate.checkpoint_id
    state = json.dumps(get_backend().get(thread_id=thread).values)
    return [
        (f"/approvals/{gate.pk}/", {"decision": "approve"}),
        (f"/approvals/{gate.pk}/claim/", {"op": "claim"}),
        ("/threads/", {"agent": "refunds", "input": "Please refund order ORD-1001"}),
        (f"/threads/{thread}/control/pause/", {}),
        (f"/threads/{thread}/control/cancel/", {}),
        (f"/threads/{thread}/state/", {"values": state}),
        (f"/threads/{thread}/messages/", {"input": "and another"}),
        (f"/threads/{thread}/checkpoints/{cp}/", {"confirm": "1"}),
        ("/admin/auth/group/add/", {"name": "sneaky"}),
        ("/logout/", {}),
    ]


def csrf_token(client: Client) -> str:
    client.get("/")  # sets the csrftoken cookie
    return str(client.cookies["csrftoken"].value)


def test_every_state_changing_form_refuses_a_post_without_the_csrf_token(gate: ApprovalRequest) -> None:
    client = admin_client()
    for path, body in forms(gate):
        assert client.post(path, body).status_code == 403, path
        assert client.post(path, body, headers={"HX-Request": "true"}).status_code == 403, path
    assert ApprovalRequest.objects.get(pk=gate.pk).status == "pending"


def test_every_state_changing_form_accepts_the_token_from_the_form_or_the_htmx_header(
    gate: ApprovalRequest,
) -> None:
    for index, (path, body) in enumerate(forms(gate)):
        client = admin_client() if index == 0 else logged_in_again()
        token = csrf_token(client)
        as_field = client.post(path, {**body, "csrfmiddlewaretoken": token})
        assert as_field.status_code != 403, path
    client = logged_in_again()
    token = csrf_token(client)
    htmx = client.post(
        f"/approvals/{gate.pk}/claim/",
        {"op": "release"},
        headers={"HX-Request": "true", "X-CSRFToken": token},
    )
    assert htmx.status_code != 403


def logged_in_again() -> Client:
    from django.contrib.auth.models import User

    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.get(username="ada"))
    return client


def test_pages_hand_htmx_the_csrf_token_for_every_request(gate: ApprovalRequest) -> None:
    client = admin_client()
    for path in ("/", f"/approvals/{gate.pk}/", f"/threads/{gate.thread_id}/"):
        page = client.get(path).content.decode()
        token = client.cookies["csrftoken"].value
        assert "hx-headers='{&quot;X-CSRFToken&quot;" in page or 'hx-headers=\'{"X-CSRFToken": "' in page, (
            path
        )
        assert token  # the header carries the masked form of this token


def test_login_itself_needs_the_csrf_token() -> None:
    make_user("rita", "reviewer")
    client = Client(enforce_csrf_checks=True)
    response = client.post("/login/", {"username": "rita", "password": "pw-for-tests-only"})
    assert response.status_code == 403
    assert "_auth_user_id" not in client.session


def test_the_api_ignores_session_cookies_so_a_forged_cross_site_post_is_unauthenticated(
    gate: ApprovalRequest,
) -> None:
    client = admin_client(csrf=False)  # a logged-in browser

    response = client.post(
        f"/api/approvals/{gate.pk}/decision", {"decision": "approve"}, content_type="application/json"
    )

    assert response.status_code == 401
    assert ApprovalRequest.objects.get(pk=gate.pk).status == "pending"


def test_session_and_csrf_cookies_are_httponly_lax_and_secure_when_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    make_user("rita", "reviewer")
    client = Client()
    client.post("/login/", {"username": "rita", "password": "pw-for-tests-only"})
    session = client.cookies["sessionid"]
    assert session["httponly"] and session["samesite"] == "Lax"

    read = settings_read_with(monkeypatch, SECURE_COOKIES="1")
    assert [read["SESSION_COOKIE_SECURE"], read["CSRF_COOKIE_SECURE"]] == [True, True]


def test_api_tokens_are_stored_only_as_hashes() -> None:
    raw = do_create_token(user=make_user("ada", "admin"))

    row = ApiToken.objects.get()
    stored = " ".join(str(v) for v in ApiToken.objects.values_list().get())
    assert raw not in stored and raw[10:] not in stored
    assert row.token_hash == ApiToken.hash_token(raw) and len(row.token_hash) == 64


@pytest.mark.parametrize("path", ["/api/threads", "/api/approvals"])
def test_revoked_tokens_and_tokens_of_deactivated_users_are_refused(path: str) -> None:
    ada = make_user("ada", "admin")
    revoked, kept = do_create_token(user=ada), do_create_token(user=ada)
    do_revoke_token(ApiToken.objects.get(token_hash=ApiToken.hash_token(revoked)))

    def status(token: str) -> int:
        return Client(headers={"Authorization": f"Bearer {token}"}).get(path).status_code

    assert (status(revoked), status(kept), status(kept + "x"), status("")) == (401, 200, 401, 401)
    ada.is_active = False
    ada.save()
    assert status(kept) == 401
    assert ApiToken.objects.filter(revoked_at__lte=timezone.now()).count() == 1
