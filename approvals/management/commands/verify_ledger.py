"""`manage.py verify_ledger`: recompute the audit ledger's hash chain; exit 1 if it was tampered with."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from approvals.actions.ledger import verify_ledger


class Command(BaseCommand):
    help = "Verify the audit ledger's hash chain: report altered, deleted or inserted events."

    def handle(self, *args: Any, **options: Any) -> None:
        report = verify_ledger()
        if not report.ok:
            for problem in report.problems:
                self.stderr.write(str(problem))
            raise CommandError(
                f"The ledger is broken: {len(report.problems)} problem(s) in {report.checked} events."
            )
        self.stdout.write(self.style.SUCCESS(f"The ledger is intact: {report.checked} events verified."))
