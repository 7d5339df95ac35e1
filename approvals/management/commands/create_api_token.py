from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.actions.tokens import do_create_token


class Command(BaseCommand):
    help = "Create an API token for a user and print it (it is stored only as a hash)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="cli")

    def handle(self, *args: Any, username: str, name: str, **options: Any) -> None:
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist as exc:
            raise CommandError(f"No user named {username!r}.") from exc
        self.stdout.write(do_create_token(user=user, name=name))
