"""Two operators edit a thread's state at the same moment over the API.

The API merged the client's fields into the head it read, then wrote that whole state under the
thread's lock without checking the head was still the one it read: an edit that committed in
between (or a step that landed after a pause) was silently undone, both callers told 200. Now
the write checks the head it merged into (and `?head=`, the one the client read): a 409 that
writes nothing, and the first edit stands.
"""

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from agents.examples.agents import ConversationState, issue_refund
from agents.prebuilt import ToolAgent
from agents.registry import registry
from approvals.actions.threads import do_edit_state
from approvals.actions.tokens import do_create_token
from approvals.api import threads as threads_api
from approvals.models import ApprovalRequest, AuditEvent
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint
from tests.factories import make_gate, make_user

AGENT = "refunds-with-notes"


class NotedState(ConversationState):
    note: str = ""
    priority: int = 0


@pytest.fixture
def gate() -> Iterator[ApprovalRequest]:
    """A thread of an agent whose state has fields besides the conversation, waiting at a gate."""
    registry.register(ToolAgent(name=AGENT, state=NotedState, tools=[issue_refund]))
    try:
        yield make_gate(agent=AGENT)
    finally:
        registry.unregister(AGENT)


def api(user: User) -> Client:
    return Client(
        headers={"Authorization": f"Bearer {do_create_token(user=user)}"}, raise_request_exception=False
    )


def patch(client: Client, thread_id: str, values: dict[str, Any], *, head: str = "") -> Any:
    query = f"?head={head}" if head else ""
    return client.patch(
        f"/api/threads/{thread_id}/state{query}", {"values": values}, content_type="application/json"
    )


def head_values(thread_id: str) -> dict[str, Any]:
    return get_backend().get(thread_id=thread_id).values


@pytest.mark.django_db
def test_an_edit_committed_while_the_api_merged_another_is_not_undone(
    gate: ApprovalRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    olga, omar = make_user("olga", "operator"), make_user("omar", "operator")
    real = threads_api.do_edit_state

    def olgas_edit_lands_first(thread_id: str, **kwargs: Any) -> Any:
        # Omar's request has read the head and merged his field into it; Olga's edit commits now.
        real(thread_id, user=olga, values={**head_values(thread_id), "note": "VIP customer"})
        return real(thread_id, **kwargs)

    monkeypatch.setattr(threads_api, "do_edit_state", olgas_edit_lands_first)
    answer = patch(api(omar), gate.thread_id, {"priority": 2})

    assert answer.status_code == 409, answer.content
    assert "Read it again" in answer.json()["detail"]
    assert head_values(gate.thread_id)["note"] == "VIP customer"  # it was "" again: Olga's edit undone
    assert list(AuditEvent.objects.filter(action="thread.update").values_list("actor_name", flat=True)) == [
        "olga"
    ]


@pytest.mark.django_db
def test_an_edit_of_a_head_the_thread_has_left_is_a_409_that_writes_nothing(gate: ApprovalRequest) -> None:
    olga, omar = make_user("olga", "operator"), make_user("omar", "operator")
    read = get_backend().get(thread_id=gate.thread_id)  # what Omar's client read
    do_edit_state(gate.thread_id, user=olga, values={**read.values, "note": "VIP customer"})
    checkpoints = Checkpoint.objects.filter(thread_id=gate.thread_id).count()

    answer = patch(api(omar), gate.thread_id, {"priority": 2}, head=read.id)

    assert answer.status_code == 409, answer.content
    assert Checkpoint.objects.filter(thread_id=gate.thread_id).count() == checkpoints
    assert head_values(gate.thread_id)["note"] == "VIP customer"
    now = get_backend().get(thread_id=gate.thread_id)
    again = patch(api(omar), gate.thread_id, {"priority": 2}, head=now.id)  # read again, then edit
    assert again.status_code == 200, again.content
    values = head_values(gate.thread_id)
    assert (values["note"], values["priority"]) == ("VIP customer", 2)


def race(
    clients: dict[str, Client], edits: dict[str, dict[str, Any]], *, thread_id: str, head: str
) -> dict[str, Any]:
    """Each operator PATCHes their edit of `head` at the same moment; their answers by name."""
    barrier, answers = threading.Barrier(len(clients)), {}

    def edit(name: str) -> None:
        try:
            barrier.wait()
            answers[name] = patch(clients[name], thread_id, edits[name], head=head)
        finally:
            connection.close()

    workers = [threading.Thread(target=edit, args=(name,)) for name in clients]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return answers


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_edits_of_the_same_head_at_the_same_moment_one_wins_the_other_is_a_409(
    gate: ApprovalRequest,
) -> None:
    olga, omar = make_user("olga", "operator"), make_user("omar", "operator")
    clients = {"olga": api(olga), "omar": api(omar)}
    edits: dict[str, dict[str, Any]] = {"olga": {"note": "VIP customer"}, "omar": {"priority": 2}}
    for _ in range(5):
        read = get_backend().get(thread_id=gate.thread_id)
        answers = race(clients, edits, thread_id=gate.thread_id, head=read.id)

        codes = sorted(a.status_code for a in answers.values())
        assert codes == [200, 409], {n: (a.status_code, a.content) for n, a in answers.items()}
        [winner] = [n for n, a in answers.items() if a.status_code == 200]
        values = head_values(gate.thread_id)
        assert {k: values[k] for k in edits[winner]} == edits[winner]
        [(field, value)] = edits[next(n for n in clients if n != winner)].items()
        assert values.get(field) != value, "the refused edit was written too"
        # Back to the start for the next round (the head moves on: each round reads it anew).
        do_edit_state(gate.thread_id, user=olga, values={**values, "note": "", "priority": 0})


@pytest.mark.django_db
def test_the_state_editor_page_refuses_to_save_over_a_head_the_thread_has_left(gate: ApprovalRequest) -> None:
    olga, omar = make_user("olga", "operator"), make_user("omar", "operator")
    page = Client()
    page.force_login(omar)
    url = f"/threads/{gate.thread_id}/state/"
    opened = page.get(url)
    head = opened.context["head"].id
    assert f'name="head" value="{head}"' in opened.content.decode()
    omars_text = opened.context["text"].replace('"priority": 0', '"priority": 2')
    do_edit_state(gate.thread_id, user=olga, values={**head_values(gate.thread_id), "note": "VIP customer"})
    checkpoints = Checkpoint.objects.filter(thread_id=gate.thread_id).count()

    saved = page.post(url, {"values": omars_text, "head": head})

    assert saved.status_code == 409
    assert "Read it again" in saved.content.decode()
    assert head_values(gate.thread_id)["note"] == "VIP customer"  # it was "" again: Olga's edit undone
    # Saved again from the refused form (it keeps the head it was read at): still refused.
    assert f'name="head" value="{head}"' in saved.content.decode()
    assert page.post(url, {"values": omars_text, "head": head}).status_code == 409
    assert Checkpoint.objects.filter(thread_id=gate.thread_id).count() == checkpoints
    reread = page.get(url)  # read again, then edit: saved
    text = reread.context["text"].replace('"priority": 0', '"priority": 2')
    assert page.post(url, {"values": text, "head": reread.context["head"].id}).status_code == 302
    values = head_values(gate.thread_id)
    assert (values["note"], values["priority"]) == ("VIP customer", 2)
