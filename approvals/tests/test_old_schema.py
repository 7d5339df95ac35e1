"""A thread stored at an older state-schema version is read at the current one everywhere: the
API, the pages, fork, edit, diffs and replay all go through the agent's upgrade functions."""

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
from django.core.management import call_command
from django.test import Client

from agents import llm
from agents.prebuilt import ToolAgent
from agents.registry import registry
from agents.state import State, add_messages
from approvals.actions.tokens import do_create_token
from approvals.actions.transfer import export_thread
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import CheckpointSource, Thread, ThreadStatus
from tests.factories import make_user

pytestmark = pytest.mark.django_db

THREAD = "old-notes-1"
USER = {"id": "msg_user", "role": "user", "content": "Hello there"}
REPLY = {"id": "msg_reply", "role": "assistant", "content": "Stored at version one"}


def to_v2(values: dict[str, Any]) -> dict[str, Any]:
    return {"messages": values["v1_log"], "topic": values["v1_subject"]}


class NotesV2(State):
    """Version 1 stored {"v1_log": [...], "v1_subject": ...}; version 2 renamed both."""

    schema_version = 2
    upgrades = {1: to_v2}
    messages: Annotated[list[dict[str, Any]], add_messages] = []
    topic: str = ""


@dataclass
class OldThread:
    first: str
    """The input checkpoint, stored at version 1."""
    head: str
    """The model's reply, stored at version 1; the thread is done."""


@pytest.fixture
def old_thread() -> Iterator[OldThread]:
    agent = registry.register(ToolAgent(name="old-notes", state=NotesV2, tools=[]))
    backend = get_backend()
    v1 = {"v1_log": [USER], "v1_subject": "billing"}
    _, first = backend.create_thread(
        thread_id=THREAD,
        agent=agent.name,
        first=NewCheckpoint(values=v1, source=CheckpointSource.INPUT, next=["model"], schema_version=1),
        status=ThreadStatus.RUNNING,
    )
    head = backend.put(
        thread_id=THREAD,
        parent_id=first.id,
        expected_head=first.id,
        checkpoint=NewCheckpoint(
            values={**v1, "v1_log": [USER, REPLY]},
            source=CheckpointSource.STEP,
            node="model",
            schema_version=1,
        ),
        status=ThreadStatus.DONE,
    )
    yield OldThread(first=first.id, head=head.id)
    registry.unregister(agent.name)


def admin_clients() -> tuple[Client, Client]:
    """An API client (bearer token) and a logged-in browser client, both an admin's."""
    ada = make_user("ada", "admin")
    page = Client()
    page.force_login(ada)
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=ada)}"}), page


def put_current(*, parent: str, values: dict[str, Any]) -> str:
    """A checkpoint written at the current version under parent, as the head (a thread that stepped on)."""
    written = get_backend().put(
        thread_id=THREAD,
        parent_id=parent,
        expected_head=parent,
        checkpoint=NewCheckpoint(values=values, source=CheckpointSource.UPDATE, schema_version=2),
        status=ThreadStatus.PAUSED,
    )
    return written.id


def test_the_api_reads_a_thread_and_a_checkpoint_stored_at_an_older_version_at_the_current_one(
    old_thread: OldThread,
) -> None:
    api, _ = admin_clients()

    thread = api.get(f"/api/threads/{THREAD}").json()
    first = api.get(f"/api/threads/{THREAD}/checkpoints/{old_thread.first}").json()

    assert thread["values"] == {"messages": [USER, REPLY], "topic": "billing"}
    assert (first["values"], first["schema_version"]) == ({"messages": [USER], "topic": "billing"}, 2)


def test_the_thread_checkpoint_and_edit_pages_show_an_old_state_at_the_current_version(
    old_thread: OldThread,
) -> None:
    _, page = admin_clients()

    thread_page = page.get(f"/threads/{THREAD}/").content.decode()
    checkpoint_page = page.get(f"/threads/{THREAD}/checkpoints/{old_thread.first}/").content.decode()
    Thread.objects.filter(pk=THREAD).update(status=ThreadStatus.PAUSED)
    edit_page = page.get(f"/threads/{THREAD}/state/").content.decode()

    assert "Stored at version one" in thread_page  # the conversation reads `messages`
    for html in (checkpoint_page, edit_page):
        assert "topic" in html and "v1_" not in html


def test_a_diff_between_an_old_and_a_new_checkpoint_shows_only_what_changed(old_thread: OldThread) -> None:
    api, page = admin_clients()
    new = put_current(parent=old_thread.head, values={"messages": [USER, REPLY], "topic": "refunds"})

    changes = api.get(f"/api/threads/{THREAD}/diff?from={old_thread.head}&to={new}").json()
    diff_page = page.get(f"/threads/{THREAD}/diff/?from={old_thread.head}&to={new}").content.decode()
    checkpoint_page = page.get(f"/threads/{THREAD}/checkpoints/{new}/").content.decode()

    assert changes == [{"kind": "changed", "path": "topic", "old": "billing", "new": "refunds"}]
    for html in (diff_page, checkpoint_page):
        assert "v1_" not in html


def test_forking_from_a_checkpoint_stored_at_an_older_version_writes_it_at_the_current_one(
    old_thread: OldThread,
) -> None:
    api, _ = admin_clients()

    response = api.post(
        f"/api/threads/{THREAD}/fork", {"checkpoint_id": old_thread.first}, content_type="application/json"
    )

    assert response.status_code == 200, response.content
    head = get_backend().get(thread_id=THREAD)
    assert (head.values, head.schema_version) == ({"messages": [USER], "topic": "billing"}, 2)


def test_editing_the_state_of_a_thread_stored_at_an_older_version(old_thread: OldThread) -> None:
    api, _ = admin_clients()
    Thread.objects.filter(pk=THREAD).update(status=ThreadStatus.PAUSED)

    response = api.patch(
        f"/api/threads/{THREAD}/state", {"values": {"topic": "refunds"}}, content_type="application/json"
    )

    assert response.status_code == 200, response.content
    assert response.json()["values"] == {"messages": [USER, REPLY], "topic": "refunds"}
    assert get_backend().get(thread_id=THREAD).schema_version == 2


def test_replay_thread_replays_a_trace_whose_checkpoints_are_at_an_older_version(
    old_thread: OldThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(export_thread(Thread.objects.get(pk=THREAD))))
    asked: list[list[dict[str, Any]]] = []

    def model(*, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> llm.ModelReply:
        asked.append(messages)
        return llm.ModelReply(content=REPLY["content"], tool_calls=[], model="scripted")

    monkeypatch.setattr(llm, "complete", model)

    call_command("replay_thread", str(trace))

    assert "replayed 1 model steps, 0 diverged" in capsys.readouterr().out
    assert asked == [[USER]]
