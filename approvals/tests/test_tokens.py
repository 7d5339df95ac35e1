"""API tokens are revocable from Django admin and the command line; a revoked token gets 401."""

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from approvals.actions.tokens import access_token_user, do_create_token
from approvals.models import ApiToken
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def status(raw: str) -> int:
    return Client(headers={"Authorization": f"Bearer {raw}"}).get("/api/approvals").status_code


def row(raw: str) -> ApiToken:
    return ApiToken.objects.get(token_hash=ApiToken.hash_token(raw))


@pytest.mark.parametrize("superuser", [True, False])  # the admin role is enough: a group, no flags
def test_the_admin_lists_tokens_with_user_created_and_last_used_and_revokes_the_selected(
    superuser: bool,
) -> None:
    rita = make_user("rita", "reviewer")
    revoked, kept = do_create_token(user=rita, name="laptop"), do_create_token(user=rita, name="ci")
    assert status(revoked) == 200  # records its last use
    ada = make_user("ada", "admin")
    ada.is_staff = ada.is_superuser = superuser
    ada.save()
    admin = Client()
    admin.force_login(ada)

    listing = admin.get("/admin/approvals/apitoken/")
    answer = admin.post(
        "/admin/approvals/apitoken/",
        {"action": "revoke", "_selected_action": [row(revoked).pk], "index": 0},
        follow=True,
    )

    text = listing.content.decode()
    assert listing.status_code == 200
    assert all(s in text for s in ("rita", "laptop", "ci", row(revoked).prefix, "Last used at", "Created at"))
    assert "Revoked 1 token(s)" in answer.content.decode()
    assert (status(revoked), status(kept)) == (401, 200)
    assert row(revoked).revoked_at is not None and row(kept).revoked_at is None


def test_the_command_lists_and_revokes_a_users_tokens_by_prefix_or_all() -> None:
    rita = make_user("rita", "reviewer")
    one, two, three = (do_create_token(user=rita) for _ in range(3))
    out = StringIO()

    call_command("create_api_token", "rita", "--list", stdout=out)
    call_command("create_api_token", "rita", "--revoke", row(one).prefix, stdout=out)
    assert (status(one), status(two), status(three)) == (401, 200, 200)
    call_command("create_api_token", "rita", "--revoke", "all", stdout=out)

    assert row(one).prefix in out.getvalue() and "Revoked 2 token(s) of rita." in out.getvalue()
    assert (status(one), status(two), status(three)) == (401, 401, 401)
    with pytest.raises(CommandError, match="no token starting with"):
        call_command("create_api_token", "rita", "--revoke", "gh_nothing")
    with pytest.raises(CommandError, match="at least 4 characters"):
        call_command("create_api_token", "rita", "--revoke", "gh")


def test_a_tokens_last_use_is_recorded_at_most_once_a_minute() -> None:
    raw = do_create_token(user=make_user("rita", "reviewer"))

    status(raw)
    first = row(raw).last_used_at
    status(raw)
    unchanged = row(raw).last_used_at
    ApiToken.objects.filter(pk=row(raw).pk).update(last_used_at=timezone.now() - timedelta(minutes=2))
    status(raw)

    assert first is not None and unchanged == first
    assert row(raw).last_used_at > first  # type: ignore[operator]


def test_a_token_finds_its_user_as_the_orm_reads_it_and_nobody_for_a_revoked_one_or_an_inactive_user() -> (
    None
):
    rita = make_user("rita", "reviewer")
    rita.last_login, rita.is_staff = timezone.now(), True
    rita.save()
    raw = do_create_token(user=rita)

    found = access_token_user(raw)

    # Every field as the ORM reads it: times with their zone, booleans as booleans.
    assert found is not None
    fresh = User.objects.get(pk=rita.pk)
    assert {f.attname: getattr(found, f.attname) for f in User._meta.concrete_fields} == {
        f.attname: getattr(fresh, f.attname) for f in User._meta.concrete_fields
    }
    assert found.is_staff is True and found.last_login is not None and found.last_login.tzinfo is not None
    assert found.groups.filter(name="reviewer").exists()
    assert access_token_user(raw + "x") is None
    User.objects.filter(pk=rita.pk).update(is_active=False)
    assert access_token_user(raw) is None
    User.objects.filter(pk=rita.pk).update(is_active=True)
    ApiToken.objects.filter(pk=row(raw).pk).update(revoked_at=timezone.now())
    assert access_token_user(raw) is None


def test_create_api_token_prints_a_token_that_authenticates_its_user() -> None:
    make_user("rita", "reviewer")
    out = StringIO()

    call_command("create_api_token", "rita", stdout=out)

    [printed] = out.getvalue().split()  # the token alone, for a shell to capture
    assert status(printed) == 200
    assert row(printed).user.username == "rita"
