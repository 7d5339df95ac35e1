"""With CHECKPOINT_ENCRYPTION_KEY set, a database dump does not show the conversation: approval
rows (arguments, descriptions, reviewers' reasons) and the audit ledger's data (decisions, state
edit and fork diffs, continued messages) are Fernet tokens like the checkpoints themselves; the
ledger's chain still verifies, and rotating the key re-encrypts them.

A worker of our own carries the key (others are paused); the human actions run in this process,
which has the same key, through the same actions the views call.
"""

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection
from pytest_django.fixtures import Settings

from agents.actions.start import check_start_thread, do_start_thread
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.ledger import verify_ledger
from approvals.actions.threads import do_continue_thread, do_edit_state, do_fork_thread
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent
from checkpoints.backends import get_backend
from checkpoints.sealed_columns import encrypted_columns, stored_text
from tests.factories import make_user
from tests.live import LiveServices, other_workers_paused, thread_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

USER_MESSAGE = "Please refund order ORD-1003, the parcel arrived crushed"
EDITED_MESSAGE = "Please refund order ORD-1003, the parcel arrived soaked"
EDIT_REASON = "VIP customer since 2019, halve it"
REJECT_REASON = "Duplicate of the earlier refund"
CONTINUED = "Also ORD-1004 please, tracking number TRK-SECRET-77"
PLAINTEXTS = ["ORD-1003", "ORD-1004", "crushed", "soaked", "VIP customer", "Duplicate of", "TRK-SECRET"]


@pytest.fixture
def sealed_worker(live_services: LiveServices, settings: Settings) -> Iterator[str]:
    key = Fernet.generate_key().decode()
    settings.CHECKPOINT_ENCRYPTION_KEY = key
    with other_workers_paused():
        worker = live_services.start_worker("sealed", {"CHECKPOINT_ENCRYPTION_KEY": key}, concurrency=1)
        try:
            yield key
        finally:
            live_services.stop(worker)


def dumped_rows() -> str:
    """Every row of the approvals and ledger tables as a database dump would show them."""
    text = []
    with connection.cursor() as cursor:
        for model in (ApprovalRequest, AuditEvent):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(model._meta.db_table)}")
            text += [repr(row) for row in cursor.fetchall()]
    return "\n".join(text)


def stored_values() -> list[str]:
    """The raw text of every encrypted column of every row."""
    return [
        stored
        for model, name in encrypted_columns()
        for stored in model._default_manager.annotate(_s=stored_text(name)).values_list("_s", flat=True)
        if stored is not None
    ]


def wait_status(thread_id: str, status: str) -> None:
    wait_for(lambda: thread_status(thread_id) == status, timeout=60, message=f"the thread to be {status}")


def pending(thread_id: str) -> ApprovalRequest:
    return ApprovalRequest.objects.get(thread_id=thread_id, status=ApprovalStatus.PENDING)


def decide(request_: ApprovalRequest, reviewer: Any, decision: str, **fields: Any) -> None:
    valid = check_decision(request_, user=reviewer, decision=decision, **fields)
    do_decide(request_, reviewer=reviewer, valid=valid)


def test_approvals_and_the_ledger_are_unreadable_in_a_dump_verify_and_rotate(
    sealed_worker: str, settings: Settings
) -> None:
    rita, olga = make_user("rita", "reviewer"), make_user("olga", "operator")
    thread_id = f"sealed-{uuid.uuid4().hex[:8]}"
    agent = check_start_thread(agent="refunds", text=USER_MESSAGE, thread_id=thread_id)
    do_start_thread(agent=agent, text=USER_MESSAGE, thread_id=thread_id, actor="olga")
    wait_status(thread_id, "waiting")
    first_checkpoint = get_backend().history(thread_id=thread_id, limit=1000)[-1].id

    # An operator edits the user's message while the thread waits: the diff holds old and new.
    values = get_backend().get(thread_id=thread_id).values
    values["messages"][0]["content"] = EDITED_MESSAGE
    do_edit_state(thread_id, user=olga, values={"messages": values["messages"]})
    wait_status(thread_id, "waiting")
    edited_args = {"order_id": "ORD-1003", "amount_cents": 999}
    decide(pending(thread_id), rita, "edit", args=edited_args, message=EDIT_REASON)
    wait_status(thread_id, "done")

    do_fork_thread(thread_id, user=olga, checkpoint_id=first_checkpoint, values=None)
    wait_status(thread_id, "waiting")
    decide(pending(thread_id), rita, "reject", message=REJECT_REASON)
    wait_status(thread_id, "done")
    do_continue_thread(thread_id, user=olga, text=CONTINUED)
    wait_status(thread_id, "waiting")

    # What the application reads is the plaintext...
    decided = ApprovalRequest.objects.get(thread_id=thread_id, status=ApprovalStatus.EDITED)
    assert (decided.decision_args, decided.decision_message) == (edited_args, EDIT_REASON)
    assert pending(thread_id).args["order_id"] == "ORD-1004"
    assert AuditEvent.objects.filter(action="thread.message").get().data["changes"]
    # ...what the database holds is not.
    dump = dumped_rows()
    assert [word for word in PLAINTEXTS if word in dump] == []
    assert stored_values() and all(v.startswith("gAAAA") for v in stored_values())
    assert verify_ledger().ok

    before = set(stored_values())
    new_key = Fernet.generate_key().decode()
    settings.CHECKPOINT_ENCRYPTION_KEY = f"{new_key},{sealed_worker}"
    call_command("rotate_checkpoint_key")
    settings.CHECKPOINT_ENCRYPTION_KEY = new_key  # the old key is gone
    assert before.isdisjoint(stored_values())
    assert verify_ledger().ok
    decided.refresh_from_db()
    assert (decided.decision_args, decided.decision_message) == (edited_args, EDIT_REASON)
    assert [word for word in PLAINTEXTS if word in dumped_rows()] == []
