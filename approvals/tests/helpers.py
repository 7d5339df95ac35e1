"""Test helpers for the inbox: gates whose Approval carries an expiry policy; the ledger written
last in a block."""

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents import dispatch
from agents.registry import registry
from agents.tools import Expiry
from approvals.models import ApprovalRequest, AuditEvent, LedgerHead
from tests.factories import make_gate


def steps_sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """The steps sent to the broker from now on, as (checkpoint id, by_person): by_person puts a
    step on RESUME_QUEUE, ahead of new threads' steps. Sent on commit, so capture the callbacks."""
    sent: list[tuple[str, bool]] = []

    def enqueue_step(*, thread_id: str, checkpoint_id: str, by_person: bool = False) -> None:
        sent.append((checkpoint_id, by_person))

    monkeypatch.setattr(dispatch, "enqueue_step", enqueue_step)
    return sent


def refunds_expire(monkeypatch: pytest.MonkeyPatch, expiry: Expiry | None) -> Any:
    """Give refunds' issue_refund gate `expiry` for the rest of the test; return the tool as it was."""
    agent = registry.get("refunds")
    tool = agent.tool("issue_refund")  # type: ignore[attr-defined]
    patched = dataclasses.replace(tool, approval=dataclasses.replace(tool.approval, expiry=expiry))
    monkeypatch.setitem(agent._tools, "issue_refund", patched)  # type: ignore[attr-defined]
    return tool


def gate_with_expiry(monkeypatch: pytest.MonkeyPatch, expiry: Expiry | None) -> ApprovalRequest:
    """make_gate for refunds' issue_refund, its Approval carrying `expiry` for this gate only."""
    tool = refunds_expire(monkeypatch, expiry)
    try:
        return make_gate()
    finally:
        monkeypatch.setitem(registry.get("refunds")._tools, "issue_refund", tool)  # type: ignore[attr-defined]


LEDGER = (AuditEvent._meta.db_table, LedgerHead._meta.db_table)


@contextmanager
def ledger_written_last() -> Iterator[None]:
    """Assert that the block writes to the ledger and that, once it does, nothing else follows:
    the ledger's head lock, held to the commit, is not held while the rest runs."""
    with CaptureQueriesContext(connection) as queries:
        yield
    statements = [
        q["sql"] for q in queries.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))
    ]
    touches = [any(table in sql for table in LEDGER) for sql in statements]
    assert any(touches), "nothing was appended to the ledger"
    first = touches.index(True)
    assert first > 0 and all(touches[first:]), statements[first:]
