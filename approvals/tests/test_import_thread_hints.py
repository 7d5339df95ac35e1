"""`import_thread` on an id it cannot use says how to import under another one, with its own
option (`--as`), not the API's `?thread_id=`."""

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from checkpoints.models import Thread
from tests.factories import make_gate

pytestmark = pytest.mark.django_db


def export(tmp_path: Path) -> tuple[str, Path]:
    """A refunds thread waiting at its gate, exported: (its id, the file)."""
    thread_id = make_gate().thread_id
    trace = tmp_path / "thread.json"
    call_command("export_thread", thread_id, str(trace))
    return thread_id, trace


def test_an_import_onto_a_taken_id_names_the_commands_option(tmp_path: Path) -> None:
    thread_id, trace = export(tmp_path)

    with pytest.raises(CommandError) as refused:
        call_command("import_thread", str(trace))

    assert str(refused.value) == (
        f"Cannot import {trace}: Thread {thread_id!r} already exists. "
        "Import it under another id with --as NEW_ID."
    )
    call_command("import_thread", str(trace), "--as", "copy-1")  # as the hint says
    assert Thread.objects.filter(pk="copy-1").exists()


def test_an_export_with_an_unusable_id_names_the_commands_option(tmp_path: Path) -> None:
    _, trace = export(tmp_path)
    document = json.loads(trace.read_text())
    document["thread"]["id"] = "a/b"
    trace.write_text(json.dumps(document))

    with pytest.raises(CommandError, match=r"invalid thread\.id \(import it under --as NEW_ID\)"):
        call_command("import_thread", str(trace))
