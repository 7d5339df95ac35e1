"""Apply retention now: each agent's policy, or limits given here."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from checkpoints import retention


class Command(BaseCommand):
    help = (
        "Delete checkpoints beyond each agent's retention (ttl_days, keep_last); never a thread's "
        "head nor one a pending approval needs. --keep-last/--ttl-days replace the agents' policies."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent", help="only threads of this agent")
        parser.add_argument("--keep-last", type=int, help="keep this many newest checkpoints per thread")
        parser.add_argument("--ttl-days", type=int, help="delete checkpoints older than this many days")

    def handle(self, *args: Any, **options: Any) -> None:
        keep_last, ttl_days = options["keep_last"], options["ttl_days"]
        if any(v is not None and v < 0 for v in (keep_last, ttl_days)):
            raise CommandError("--keep-last and --ttl-days must not be negative")
        given = keep_last is not None or ttl_days is not None
        override = retention.Override(ttl_days=ttl_days, keep_last=keep_last) if given else None
        report = retention.prune_all(agent=options["agent"], override=override)
        self.stdout.write(
            f"Pruned {report.checkpoints} checkpoints from {report.threads} threads and "
            f"{report.values} stored values no kept checkpoint needed; "
            f"dropped {report.store_items} expired store items."
        )
