import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.llm import ModelUnavailable
from agents.registry import UnknownAgent
from agents.replay import NotReplayable, replay
from approvals.actions.transfer import InvalidExport, check_export
from checkpoints import json_text


class Command(BaseCommand):
    help = "Replay an exported thread's model steps against the current agent code; exit 1 if it diverges."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)

    def handle(self, *args: Any, file: Path, **options: Any) -> None:
        try:
            document = json_text.loads(file.read_text())
        # ValueError: bad UTF-8, bad JSON, or JSON no one reads (too deep, NaN, an endless integer).
        except (OSError, ValueError) as exc:
            raise CommandError(f"Cannot read {file}: {exc}") from exc
        try:
            # Everything an import checks but the id it is written under: a document an import
            # refuses is refused here, in its words, before any step runs.
            check_export(document)
        except InvalidExport as exc:
            raise CommandError(f"Cannot replay {file}: {exc}") from exc
        try:
            report = replay(document)
        except NotReplayable as exc:
            raise CommandError(f"{file} cannot be replayed: {exc}") from exc
        except (KeyError, TypeError) as exc:  # an agent's upgrade meeting data it never expected
            raise CommandError(
                f"{file} holds a state the agent cannot upgrade: {type(exc).__name__}: {exc}"
            ) from exc
        except UnknownAgent as exc:
            raise CommandError(str(exc)) from exc
        except ModelUnavailable as exc:  # the offline model is served by the web server
            raise CommandError(f"The model could not be reached: {exc}") from exc
        except ValueError as exc:  # a state the agent cannot upgrade or validate
            raise CommandError(f"{file} holds a state the agent cannot read: {exc}") from exc
        if not report.replayed and report.steps:
            raise CommandError(
                f"{report.agent} has no model steps to replay: its steps run inside its framework "
                "and cannot be replayed one by one."
            )
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
