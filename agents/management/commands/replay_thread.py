import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.registry import UnknownAgent
from agents.replay import replay


class Command(BaseCommand):
    help = "Replay an exported thread's model steps against the current agent code; exit 1 if it diverges."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)

    def handle(self, *args: Any, file: Path, **options: Any) -> None:
        try:
            document = json.loads(file.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CommandError(f"Cannot read {file}: {exc}") from exc
        try:
            report = replay(document)
        except (KeyError, TypeError) as exc:
            raise CommandError(f"{file} is not a Gatehouse thread export: missing {exc}") from exc
        except UnknownAgent as exc:
            raise CommandError(str(exc)) from exc
        except ValueError as exc:  # a state the agent cannot upgrade or validate
            raise CommandError(f"{file} holds a state the agent cannot read: {exc}") from exc
        self.stdout.write(
            f"{report.agent}: replayed {report.replayed} model steps, {len(report.divergences)} diverged."
        )
        for d in report.divergences:
            self.stdout.write(
                f"  step {d.step}: expected {json.dumps(d.expected)}\n"
                f"  {' ' * len(str(d.step))}       got      {json.dumps(d.got)}"
            )
        if not report.ok:
            raise CommandError("Behaviour diverged from the recorded trace.", returncode=1)
