"""`replay_thread FILE` checks the file as an import does.

It checked only the document's shape and tree (parse_document), not what check_import asks of
each checkpoint against its agent: a node the agent lacks, a tenant no thread may have, a
conversation not in the stored shape. Such a document replayed, calling the model, where an
import refused it. The command now runs the import's checks (check_export): the same words,
and no model step runs.
"""

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agents import llm
from checkpoints.models import Thread

pytestmark = pytest.mark.django_db

USER = {"id": "m1", "role": "user", "content": "Please refund order ORD-1001"}
REPLY = {"id": "m2", "role": "assistant", "content": "Done."}


def checkpoint(cid: str, parent: str | None, step: int, **fields: Any) -> dict[str, Any]:
    """An exported checkpoint of the refunds agent's state."""
    return {
        "id": cid,
        "parent_id": parent,
        "step": step,
        "source": "step",
        "node": "",
        "next": [],
        "created_by": "agent",
        "created_at": "2024-05-01T10:00:00+00:00",
        "schema_version": 1,
        "metadata": {},
        "digest": "",
        "values": {"messages": [USER]},
    } | fields


def trace(tmp_path: Path, *, root: dict[str, Any], thread: dict[str, Any]) -> Path:
    """A done refunds thread: root, then a model step that answered."""
    path = tmp_path / "trace.json"
    document = {
        "format": "gatehouse.thread/1",
        "exported_at": "2024-05-01T10:00:00+00:00",
        "thread": {"id": "t", "agent": "refunds", "status": "done", "head": "b"} | thread,
        "checkpoints": [
            checkpoint("a", None, 0) | root,
            checkpoint("b", "a", 1, node="model", values={"messages": [USER, REPLY]}),
        ],
    }
    path.write_text(json.dumps(document))
    return path


UNNAMED_CALL = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {}}]}


@pytest.mark.parametrize(
    "root,thread,problem",
    [
        ({"next": ["nowhere"]}, {}, "refunds has no node 'nowhere'"),
        ({}, {"tenant": "not a tenant!"}, "thread.tenant"),
        ({"values": {"messages": [USER, UNNAMED_CALL]}}, {}, "checkpoint a: "),
    ],
    ids=["unknown-node", "bad-tenant", "call-without-id-or-name"],
)
def test_a_document_an_import_refuses_is_refused_by_replay_in_the_same_words_and_no_step_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    root: dict[str, Any],
    thread: dict[str, Any],
    problem: str,
) -> None:
    asked: list[Any] = []

    def model(**kwargs: Any) -> llm.ModelReply:
        asked.append(kwargs)
        return llm.ModelReply(content="Done.", tool_calls=[], model="offline")

    monkeypatch.setattr(llm, "complete", model)
    path = trace(tmp_path, root=root, thread=thread)

    with pytest.raises(CommandError) as imported:
        call_command("import_thread", str(path))
    with pytest.raises(CommandError) as replayed:
        call_command("replay_thread", str(path))

    import_said = str(imported.value).split(f"{path}: ", 1)[1]
    assert problem in import_said
    assert str(replayed.value) == f"Cannot replay {path}: {import_said}"
    assert asked == []  # refused before any model step ran
    assert not Thread.objects.exists()


def test_a_document_an_import_takes_only_under_another_id_still_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The id it would be written under is the import's question (--as renames it), not the
    document's: replay writes nothing."""
    reply = llm.ModelReply(content="Done.", tool_calls=[], model="offline")
    monkeypatch.setattr(llm, "complete", lambda **kwargs: reply)
    path = trace(tmp_path, root={}, thread={"id": "not an id!"})

    with pytest.raises(CommandError, match="import it under --as NEW_ID"):
        call_command("import_thread", str(path))
    call_command("replay_thread", str(path))  # replayed 1 model step, none diverged
