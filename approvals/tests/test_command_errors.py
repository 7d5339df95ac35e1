"""Bad input to the operator commands ends in a CommandError (exit 1, no traceback)."""

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agents import llm
from agents.llm import ModelUnavailable
from checkpoints.backends import get_backend
from checkpoints.keyset import batches
from checkpoints.models import Checkpoint
from checkpoints.tests.helpers import THREAD, start, write


def export(tmp_path: Path) -> Path:
    """A refunds thread whose steps are none of them `model` steps, as a framework agent's are."""
    _, first = start(get_backend(), values={"messages": []})
    write(get_backend(), first, {"messages": []})
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
    trace = export(tmp_path)

    with pytest.raises(CommandError, match="model could not be reached"):
        call_command("replay_thread", str(trace))


def trace_of(tmp_path: Path, *checkpoints: dict[str, Any], head: str) -> Path:
    """A refunds thread's export of these checkpoints, listed in this order."""
    trace = tmp_path / "trace.json"
    thread = {"id": "t", "agent": "refunds", "status": "done", "head": head}
    document = {"format": "gatehouse.thread/1", "exported_at": "2024-05-01T10:00:00+00:00"}
    trace.write_text(json.dumps({**document, "thread": thread, "checkpoints": checkpoints}))
    return trace


def recorded(
    cid: str, parent: str | None, step: int, *, node: str = "", messages: Any = ()
) -> dict[str, Any]:
    """An exported checkpoint of refunds' state."""
    return {
        "id": cid,
        "parent_id": parent,
        "step": step,
        "source": "step",
        "node": node,
        "next": [],
        "created_by": "agent",
        "created_at": "2024-05-01T10:00:00+00:00",
        "schema_version": 1,
        "metadata": {},
        "digest": "",
        "values": {"messages": list(messages)},
    }


USER = {"id": "m1", "role": "user", "content": "Please refund order ORD-1001"}


# Before the tree was checked, each of these walked the parents for ever (a list growing all along).
@pytest.mark.timeout(5, func_only=True)
@pytest.mark.parametrize(
    "checkpoints,head,problem",
    [
        ([recorded("a", "b", 1), recorded("b", "a", 2)], "a", "the head a must be a leaf"),
        # The root's parent names a checkpoint listed later: pruned, as an import reads it.
        (
            [recorded("a", "c", 0), recorded("b", "a", 1), recorded("c", "a", 1)],
            "b",
            "no model steps to replay",
        ),
    ],
    ids=["two-checkpoint-cycle", "through-the-root"],
)
def test_replay_of_a_parent_cycle_ends_in_a_command_error(
    tmp_path: Path, checkpoints: list[dict[str, Any]], head: str, problem: str
) -> None:
    with pytest.raises(CommandError, match=problem):
        call_command("replay_thread", str(trace_of(tmp_path, *checkpoints, head=head)))


def test_replay_of_a_head_that_names_no_checkpoint_says_so(tmp_path: Path) -> None:
    trace = trace_of(tmp_path, recorded("a", None, 0), recorded("b", "a", 1), head="gone")

    with pytest.raises(CommandError, match="the head gone is not among the checkpoints"):
        call_command("replay_thread", str(trace))


@pytest.mark.django_db
@pytest.mark.parametrize(
    "messages,problem",
    [
        ([], r"checkpoint b \(step 1\), a model step, recorded no message"),
        # What an import refuses, replay refuses before any step runs, in the import's words.
        ([{"content": "hi"}], r"invalid export: checkpoint b: messages\.0\.role: Field required"),
    ],
    ids=["none", "no-role"],
)
def test_replay_of_a_model_step_without_a_message_says_which_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, messages: list[Any], problem: str
) -> None:
    reply = llm.ModelReply(content="Done.", tool_calls=[], model="offline")
    monkeypatch.setattr(llm, "complete", lambda **kwargs: reply)  # the model answers; the record is bad
    trace = trace_of(
        tmp_path,
        recorded("a", None, 0, messages=[USER]),
        recorded("b", "a", 1, node="model", messages=messages),
        head="b",
    )

    with pytest.raises(CommandError, match=problem):
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
