from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.actions.transfer import InvalidExport, check_import, do_import_thread
from checkpoints import json_text
from checkpoints.backends.base import ThreadExists

RENAME = "--as NEW_ID"  # this command's way to import under another id (the API's is ?thread_id=)


class Command(BaseCommand):
    help = "Recreate a thread from an export file (see export_thread), optionally under a new id."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--as", dest="thread_id", default=None, help="a new thread id")

    def handle(self, *args: Any, file: Path, thread_id: str | None, **options: Any) -> None:
        try:
            valid = check_import(json_text.loads(file.read_text()), thread_id=thread_id, rename_with=RENAME)
            thread = do_import_thread(valid, user=None)
        except ThreadExists as exc:
            raise CommandError(
                f"Cannot import {file}: {exc} Import it under another id with {RENAME}."
            ) from exc
        # ValueError: bad UTF-8, bad JSON, or JSON no one reads (too deep, NaN, an endless integer).
        except (OSError, ValueError, InvalidExport) as exc:
            raise CommandError(f"Cannot import {file}: {exc}") from exc
        self.stdout.write(f"Imported thread {thread.id} ({thread.status}).")
