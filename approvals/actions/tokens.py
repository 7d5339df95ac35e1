"""API tokens: shown once, stored as SHA-256, revocable."""

import secrets

from django.contrib.auth.models import User
from django.utils import timezone

from approvals.models import ApiToken


def do_create_token(*, user: User, name: str = "default") -> str:
    """Create a token and return it; only its hash is kept."""
    raw = "gh_" + secrets.token_urlsafe(32)
    ApiToken.objects.create(user=user, name=name, token_hash=ApiToken.hash_token(raw), prefix=raw[:10])
    return raw


def do_revoke_token(token: ApiToken) -> None:
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
