"""A thread of any length opens: the requests a page of its conversation needs are read in one
query whose parameters do not grow with the thread (SQLite takes at most 32,766 a statement as
built by default, Postgres 65,535 bound on the server), so a conversation of 40,000 tool calls
shows its thread page and its decision pages, tags paired as on a short one, for the same number
of queries."""

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from approvals.models import ApprovalRequest, ApprovalStatus
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import CheckpointSource, ThreadStatus
from tests.factories import make_gate
from tests.test_decision_page_scale import asked_pane, moved_on
from tests.test_thread_page_scale import add_requests, client_for, refund_call, shown_turns, tag_of_turn

pytestmark = pytest.mark.django_db

MANY_CALLS = 40_000
"""More tool calls than SQLite takes parameters in one statement."""
TURNS = 60
SQLITE_DEFAULT_MAX_VARIABLES = 32_766
"""SQLITE_MAX_VARIABLE_NUMBER as SQLite builds by default (Debian's is 250,000): a deployment may
well have it."""


@pytest.fixture(autouse=True)
def sqlite_as_built_by_default() -> Iterator[None]:
    if connection.vendor != "sqlite":
        yield
        return
    connection.ensure_connection()
    raw = connection.connection
    was = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, SQLITE_DEFAULT_MAX_VARIABLES)
    yield
    raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, was)


def lookups(count: int) -> dict[str, Any]:
    """One assistant message calling an ungated tool `count` times (cheap to store: one value)."""
    calls = [
        {
            "id": f"call_lookup_{n}",
            "type": "function",
            "function": {"name": "lookup_order", "arguments": "{}"},
        }
        for n in range(count)
    ]
    return {"role": "assistant", "content": "looking everything up", "tool_calls": calls}


def thread_of_calls(*, lookup_calls: int) -> ApprovalRequest:
    """make_gate's thread, then one message with `lookup_calls` calls, then TURNS turns of a refund
    call (call_<n>, "turn <n>") and its result, at the head. Requests: call_40 rejected, turn 50's
    call approved under a key that is no call's id (as LangGraph keys an interrupt), and the newest
    turn's call pending, asked at the head; the thread then moves on. Returns the newest turn's."""
    gate = make_gate()
    backend = get_backend()
    head = backend.get(thread_id=gate.thread_id)
    messages = [*head.values["messages"], lookups(lookup_calls)]
    for n in range(TURNS):
        messages.append({"role": "assistant", "content": f"turn {n}", "tool_calls": [refund_call(n)]})
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": f"refunded {n}"})
    backend.put(
        thread_id=gate.thread_id,
        parent_id=head.id,
        expected_head=head.id,
        status=ThreadStatus.WAITING,
        checkpoint=NewCheckpoint(
            values={**head.values, "messages": messages}, source=CheckpointSource.STEP, node="model"
        ),
    )
    newest = f"call_{TURNS - 1}"
    add_requests(gate, {"call_40": ApprovalStatus.REJECTED, newest: ApprovalStatus.PENDING})
    turn_50 = json.loads(refund_call(50)["function"]["arguments"])
    add_requests(gate, {"interrupt-50:0": ApprovalStatus.APPROVED}, args=turn_50)
    moved_on(gate.thread_id)
    return ApprovalRequest.objects.get(thread_id=gate.thread_id, key=newest)


def make_gate_messages() -> list[dict[str, Any]]:
    gate = make_gate()
    return list(get_backend().get(thread_id=gate.thread_id).values["messages"])


def pages(item: ApprovalRequest, client: Client) -> list[tuple[str, str, int]]:
    """The thread page, the decision page and its earlier page: (url, html, queries) each."""
    seen = []
    for url in (
        f"/threads/{item.thread_id}/",
        f"/approvals/{item.pk}/",
        f"/approvals/{item.pk}/?asked_before=90",
    ):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200, url
        seen.append((url, response.content.decode(), len(queries)))
    return seen


def test_a_thread_of_40000_tool_calls_shows_its_pages_with_tags_paired_for_the_queries_of_a_short_one() -> (
    None
):
    short, long = thread_of_calls(lookup_calls=3), thread_of_calls(lookup_calls=MANY_CALLS)
    client = client_for("olga", "admin")
    client.get(f"/approvals/{short.pk}/")  # caches warm (sessions, the agent registry)

    short_pages, long_pages = pages(short, client), pages(long, client)

    thread_page, decision_page, earlier_page = (html for _, html, _ in long_pages)
    assert shown_turns(thread_page)[-1] == TURNS - 1
    assert tag_of_turn(thread_page, 40) == "rejected"
    assert tag_of_turn(thread_page, 50) == "approved"  # the request keyed by no call's id
    asked = asked_pane(decision_page)
    assert tag_of_turn(asked, 40) == "rejected" and tag_of_turn(asked, 50) == "approved"
    assert f"of {len(make_gate_messages()) + 1 + 2 * TURNS}</" in asked  # as asked: no result yet
    earlier = asked_pane(earlier_page)
    assert "looking everything up" in earlier and tag_of_turn(earlier, 40) == "rejected"
    assert "data-asked-gate" in earlier  # the newest turn's call, pinned below the earlier page
    assert [n for _, _, n in long_pages] == [n for _, _, n in short_pages]
