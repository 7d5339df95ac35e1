"""An import's decision history (tool arguments, edits, reviewers' messages) is kept like every
other decision: encrypted with CHECKPOINT_ENCRYPTION_KEY, re-sealed by `rotate_checkpoint_key`,
gone with its checkpoint; a thread imported before it had a table of its own still exports it."""

import json
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection
from pytest_django.fixtures import Settings

from approvals.actions.threads import do_delete_thread
from approvals.actions.transfer import HISTORY_KEY, check_import, do_import_thread, export_thread
from approvals.models import ImportedDecision
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import CheckpointSource, Thread, ThreadStatus
from checkpoints.retention import Limits, prune_thread
from checkpoints.sealed_columns import stored_text
from tests.factories import make_user
from tests.test_security_import import hand_written_document

pytestmark = pytest.mark.django_db

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()
SECRET_ARGS = {"order_id": "ORD-SECRET-41", "amount_cents": 4321}
SECRET_MESSAGE = "Customer TRK-SECRET-88 is a friend of the CEO"


def decision(checkpoint_id: str) -> dict[str, Any]:
    return {
        "checkpoint_id": checkpoint_id,
        "key": "call_forged",
        "action": "issue_refund",
        "args": {"order_id": "ORD-1002", "amount_cents": 777777},
        "status": "edited",
        "decided_by": "rita",
        "decision_args": SECRET_ARGS,
        "message": SECRET_MESSAGE,
    }


def imported(thread_id: str, *, at: tuple[str, ...] = ("c2",)) -> list[dict[str, Any]]:
    """Import the hand-written refund document with a decision at each of `at`; its history as
    exported again."""
    document = hand_written_document(decided=False)
    document["decisions"] = [decision(c) for c in at]
    do_import_thread(check_import(document, thread_id=thread_id), user=None)
    return history(thread_id)


def history(thread_id: str) -> list[dict[str, Any]]:
    return [d for d in export_thread(Thread.objects.get(pk=thread_id))["decisions"] if d.get("imported")]


def dumped_rows() -> str:
    """Every row of every table, as a database dump would show them."""
    text = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            text += [repr(row) for row in cursor.fetchall()]
    return "\n".join(text)


def sealed_records() -> list[str]:
    rows = ImportedDecision.objects.annotate(_s=stored_text("record")).order_by("position")
    return list(rows.values_list("_s", flat=True))


def test_an_imported_decision_is_encrypted_at_rest_and_exported_in_plaintext(settings: Settings) -> None:
    settings.CHECKPOINT_ENCRYPTION_KEY = OLD

    [kept] = imported("sealed-import")

    assert (kept["decision_args"], kept["message"]) == (SECRET_ARGS, SECRET_MESSAGE)
    dump = dumped_rows()
    assert [word for word in ("ORD-SECRET", "TRK-SECRET", "friend of") if word in dump] == []
    assert [len(c.metadata.get(HISTORY_KEY, [])) for c in get_backend().list(thread_id="sealed-import")] == [
        0,
        0,
    ]


def test_rotating_the_key_reseals_the_imported_history(settings: Settings) -> None:
    settings.CHECKPOINT_ENCRYPTION_KEY = OLD
    before = imported("rotated-import")
    settings.CHECKPOINT_ENCRYPTION_KEY = f"{NEW},{OLD}"

    call_command("rotate_checkpoint_key")
    settings.CHECKPOINT_ENCRYPTION_KEY = NEW  # the old key is gone

    assert history("rotated-import") == before
    [record] = sealed_records()
    assert json.loads(Fernet(NEW).decrypt(record))["message"] == SECRET_MESSAGE


def test_a_thread_imported_with_history_in_metadata_still_exports_it_and_reimports_it_sealed() -> None:
    # An import made before ImportedDecision: the checkpoint's metadata holds the records.
    record = {k: v for k, v in decision("").items() if k != "checkpoint_id"}
    _, head = get_backend().create_thread(
        thread_id="legacy-import",
        agent="refunds",
        status=ThreadStatus.DONE,
        first=NewCheckpoint(
            values={"messages": [{"id": "m1", "role": "user", "content": "Refund me"}]},
            source=CheckpointSource.INPUT,
            metadata={HISTORY_KEY: [record]},
        ),
    )

    document = export_thread(Thread.objects.get(pk="legacy-import"))
    assert document["decisions"] == [{**record, "checkpoint_id": head.id, "imported": True}]
    do_import_thread(check_import(document, thread_id="legacy-again"), user=None)

    assert [d["message"] for d in history("legacy-again")] == [SECRET_MESSAGE]
    assert [HISTORY_KEY in c.metadata for c in get_backend().list(thread_id="legacy-again")] == [False]
    assert ImportedDecision.objects.filter(thread_id="legacy-again").count() == 1


def test_imported_decisions_go_with_their_checkpoint_when_pruned_or_deleted() -> None:
    imported("pruned-import", at=("c1", "c2"))
    assert ImportedDecision.objects.filter(thread_id="pruned-import").count() == 2

    prune_thread("pruned-import", limits=Limits(keep_last=1))  # the root goes, with its decision
    assert [d["checkpoint_id"] for d in history("pruned-import")] == [
        str(Thread.objects.get(pk="pruned-import").head_id)
    ]
    do_delete_thread("pruned-import", user=make_user("ada", "admin"))

    assert not ImportedDecision.objects.exists()
