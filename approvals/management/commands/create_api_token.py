from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.actions.tokens import do_create_token, do_revoke_tokens, user_tokens


class Command(BaseCommand):
    help = (
        "Create an API token for a user and print it (it is stored only as a hash); "
        "or --list the user's tokens, or --revoke them by prefix (or 'all')."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="cli")
        parser.add_argument(
            "--list", dest="list_tokens", action="store_true", help="list the user's tokens instead"
        )
        parser.add_argument(
            "--revoke", metavar="PREFIX", help="revoke the user's tokens starting with PREFIX, or 'all'"
        )

    def handle(
        self, *args: Any, username: str, name: str, list_tokens: bool, revoke: str | None, **options: Any
    ) -> None:
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist as exc:
            raise CommandError(f"No user named {username!r}.") from exc
        if revoke is not None:
            self._revoke(user, revoke)
        elif list_tokens:
            for token in user_tokens(user):
                state = f"revoked {token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked_at else "live"
                used = f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "never"
                self.stdout.write(
                    f"{token.prefix}  {token.name}  created {token.created_at:%Y-%m-%d}  "
                    f"last used {used}  {state}"
                )
        else:
            self.stdout.write(do_create_token(user=user, name=name))

    def _revoke(self, user: Any, prefix: str) -> None:
        if prefix != "all" and len(prefix) < 4:
            raise CommandError("Give at least 4 characters of the token's prefix (see --list), or 'all'.")
        tokens = user_tokens(user, prefix="" if prefix == "all" else prefix)
        if not tokens.exists():
            raise CommandError(f"{user.get_username()} has no token starting with {prefix!r} (see --list).")
        revoked = do_revoke_tokens(tokens)
        self.stdout.write(f"Revoked {revoked} token(s) of {user.get_username()}.")
