import json
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.actions.transfer import export_thread
from checkpoints import selectors as checkpoint_selectors
from checkpoints.backends.base import CheckpointError
from checkpoints.models import Thread
from checkpoints.storage.crypto import SealError


class Command(BaseCommand):
    help = "Write a thread (or one branch, ending at --branch CHECKPOINT_ID) to a JSON file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("thread_id")
        parser.add_argument("file", type=Path)
        parser.add_argument("--branch", default=None)

    def handle(self, *args: Any, thread_id: str, file: Path, branch: str | None, **options: Any) -> None:
        try:
            thread = checkpoint_selectors.thread(thread_id)
        except Thread.DoesNotExist as exc:
            raise CommandError(f"No thread {thread_id!r}.") from exc
        try:
            document = export_thread(thread, branch=branch)
        except (CheckpointError, SealError, ImproperlyConfigured) as exc:
            # A branch not in the thread, or stored data this CHECKPOINT_ENCRYPTION_KEY cannot open.
            raise CommandError(f"Cannot export {thread_id!r}: {exc}") from exc
        try:
            file.write_text(json.dumps(document, indent=2, ensure_ascii=False))
        except OSError as exc:  # a missing folder, a directory, no permission
            raise CommandError(f"Cannot write {file}: {exc}") from exc
        self.stdout.write(f"Wrote {len(document['checkpoints'])} checkpoints to {file}.")
