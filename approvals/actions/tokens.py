"""API tokens: shown once, stored as SHA-256, revocable."""

import secrets
from datetime import timedelta

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Model, QuerySet
from django.utils import timezone

from approvals.models import ApiToken
from checkpoints.backends.orm import prepared

# A token's last use is recorded at most this often: one write per request would make every
# API call also an UPDATE of the same row.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def do_create_token(*, user: User, name: str = "default") -> str:
    """Create a token and return it; only its hash is kept."""
    raw = "gh_" + secrets.token_urlsafe(32)
    ApiToken.objects.create(user=user, name=name, token_hash=ApiToken.hash_token(raw), prefix=raw[:10])
    return raw


def access_token_user(raw: str) -> User | None:
    """The active user a live (unrevoked) token belongs to, recording the use; None otherwise."""
    # Every API request asks this: plain SQL, as the ORM spent about 0.5 ms of CPU on the
    # query's compilation and the join's rows.
    found = prepared.fetch_one(
        f"SELECT {prepared.columns(ApiToken, 't')}, {prepared.columns(User, 'u')} "
        f"FROM {ApiToken._meta.db_table} t JOIN {User._meta.db_table} u ON u.{_pk(User)} = t.user_id "
        "WHERE t.token_hash = %s AND t.revoked_at IS NULL AND u.is_active = %s",
        [ApiToken.hash_token(raw), True],
    )
    if found is None:
        return None
    split = len(ApiToken._meta.concrete_fields)
    token, user = prepared.instance(ApiToken, found[:split]), prepared.instance(User, found[split:])
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return user


def _pk(model: type[Model]) -> str:
    pk = model._meta.pk
    assert pk is not None
    return connection.ops.quote_name(pk.column)


def do_revoke_token(token: ApiToken) -> None:
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])


def do_revoke_tokens(tokens: "QuerySet[ApiToken]") -> int:
    """Revoke every live token of the queryset; return how many were live."""
    return tokens.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())


def user_tokens(user: User, *, prefix: str = "") -> "QuerySet[ApiToken]":
    """A user's tokens, newest first; `prefix` narrows them to those whose shown prefix starts so."""
    rows = ApiToken.objects.filter(user=user).order_by("-created_at", "-pk")
    return rows.filter(prefix__startswith=prefix) if prefix else rows
