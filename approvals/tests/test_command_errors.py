"""Bad input to the operator commands ends in a CommandError (exit 1, no traceback)."""

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agents.llm import ModelUnavailable
from checkpoints.backends import get_backend
from checkpoints.keyset import batches
from checkpoints.models import Checkpoint
from checkpoints.tests.helpers import THREAD, put_after, start


def export(tmp_path: Path) -> Path:
    """A refunds thread whose steps are none of them `model` steps, as a framework agent's are."""
    _, first = start(get_backend())
    put_after(get_backend(), first)
    trace = tmp_path / "trace.json"
    call_command("export_thread", THREAD, str(trace))
    return trace


@pytest.mark.django_db
@pytest.mark.parametrize("where", ["missing/x.json", "."])
def test_export_to_a_path_it_cannot_write_says_so(tmp_path: Path, where: str) -> None:
    start(get_backend())

    with pytest.raises(CommandError, match="Cannot write"):
        call_command("export_thread", THREAD, str(tmp_path / where))


@pytest.mark.django_db
@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe", b"[" * 2000 + b"]" * 2000, b"1" * 4301],
    ids=["not-utf8", "too-deep", "huge-integer"],
)
@pytest.mark.parametrize("command", ["replay_thread", "import_thread"])
def test_an_unreadable_file_says_so(tmp_path: Path, content: bytes, command: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)

    with pytest.raises(CommandError, match=str(bad)):
        call_command(command, str(bad))


@pytest.mark.django_db
def test_replay_with_no_model_steps_says_there_is_nothing_to_replay(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no model steps to replay"):
        call_command("replay_thread", str(export(tmp_path)))


@pytest.mark.django_db
def test_replay_without_a_model_says_it_could_not_be_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreachable(document: dict[str, Any]) -> Any:
        raise ModelUnavailable("connection refused")

    monkeypatch.setattr("agents.management.commands.replay_thread.replay", unreachable)
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({}))

    with pytest.raises(CommandError, match="model could not be reached"):
        call_command("replay_thread", str(trace))


@pytest.mark.parametrize("value", ["0", "-1"])
@pytest.mark.parametrize(
    "command,option", [("bench_policies", "--repeat"), ("rotate_checkpoint_key", "--batch-size")]
)
def test_counts_must_be_positive(command: str, option: str, value: str) -> None:
    with pytest.raises(CommandError, match="positive integer"):
        call_command(command, f"{option}={value}")


def test_a_batch_walk_refuses_an_empty_batch() -> None:
    with pytest.raises(ValueError, match="positive"):
        next(batches(Checkpoint.objects.all(), batch_size=0))
