"""API tokens: shown once, stored as SHA-256, revocable."""

import secrets
from datetime import timedelta

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone

from approvals.models import ApiToken

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
    try:  # get(), not first(): the hash is unique, and first() would compile an ORDER BY each call
        row = ApiToken.objects.select_related("user").get(
            token_hash=ApiToken.hash_token(raw), revoked_at__isnull=True, user__is_active=True
        )
    except ApiToken.DoesNotExist:
        return None
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row.user


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
