"""Re-encrypt everything stored with the first CHECKPOINT_ENCRYPTION_KEY."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from checkpoints.backends import get_backend
from checkpoints.command_args import positive_int
from checkpoints.langgraph import sealing as langgraph_sealing
from checkpoints.sealed_columns import reseal_columns
from checkpoints.storage.crypto import current_sealer


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored value, pending write, store item, LangGraph checkpoint and encrypted "
        "column (approvals' arguments and reasons, the audit ledger's data) with the first key of "
        "CHECKPOINT_ENCRYPTION_KEY (encrypting what was stored before a key was set). Rotate by "
        "putting a new key first, running this, then removing the old key."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=positive_int, default=500)

    def handle(self, *args: Any, **options: Any) -> None:
        if not current_sealer().encrypts:
            raise CommandError("CHECKPOINT_ENCRYPTION_KEY is not set: there is no key to encrypt with.")
        rewritten = get_backend().reseal(batch_size=options["batch_size"])
        rewritten += langgraph_sealing.reseal(batch_size=options["batch_size"])
        rewritten += reseal_columns(batch_size=options["batch_size"])
        self.stdout.write(f"Re-encrypted {rewritten} rows with the first key.")
