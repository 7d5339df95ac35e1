"""runs.stream of the LangGraph server API: server-sent events read from the checkpoints a run
writes, polled until it stops at a gate, ends or fails. `values` is the head's state; `updates`,
`messages-tuple` and `events` come from the tasks LangGraph ran since the run began, found by
walking LangGraph's own checkpoints back along their parents."""

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection

from agents.loading import load_checkpoint
from approvals.actions.langgraph_runs import langgraph_agent
from approvals.api.langgraph_state import jsonable, settled, shown_interrupts, state_at
from checkpoints import selectors as checkpoint_selectors
from checkpoints.backends.base import CheckpointData, CheckpointError
from checkpoints.models import Thread, ThreadStatus

log = logging.getLogger(__name__)

STREAM_MODES = {"values", "updates", "messages-tuple", "events"}
UPDATES_LIMIT = 200  # LangGraph checkpoints one poll reads back at most


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


async def run_events(
    thread_id: str,
    run_id: str,
    *,
    modes: set[str],
    since: str,
    then: Callable[[], Any] | None = None,
    gone_ends: bool = False,
) -> AsyncIterator[bytes]:
    """An async iterator, so the web server sends each event as it comes (a sync one is read whole
    first). `then` is called once the run has stopped and every event was sent (not when the
    stream ends sooner: its time is up, its client went away, or the thread could not be read).
    `gone_ends`: the thread deleted is the run's end (a background stateless run's thread, deleted
    once the run ended), not an error."""
    yield _sse("metadata", {"run_id": run_id, "attempt": 1})
    deadline = time.monotonic() + settings.LANGGRAPH_RUN_WAIT_S
    shown: Any = None
    while True:
        try:
            shown, stopped, events, since = await sync_to_async(_snapshot)(
                thread_id, shown=shown, modes=modes, since=since
            )
        except Thread.DoesNotExist:
            if not gone_ends:
                yield _sse("error", {"error": "NotFound", "message": "the thread was deleted"})
            return
        except CheckpointError as exc:  # the response has begun: an error event is how to say so
            log.warning("the stream of thread %s stopped: %s", thread_id, exc)
            yield _sse("error", {"error": type(exc).__name__, "message": str(exc)})
            return
        except Exception as exc:
            log.exception("the stream of thread %s failed", thread_id)
            yield _sse(
                "error", {"error": type(exc).__name__, "message": "the thread's state could not be read"}
            )
            return
        for event, data in events:
            yield _sse(event, data)
        if stopped:
            if then is not None:
                try:
                    await sync_to_async(_closing(then))()
                except Exception:  # every event was sent: what is left undone is logged
                    log.exception("after the stream of thread %s", thread_id)
            return
        if time.monotonic() > deadline:
            return
        await asyncio.sleep(0.2)


async def ended_run_events(run_id: str) -> AsyncIterator[bytes]:
    """The stream of a run that ended before it was joined: its metadata, and nothing to come."""
    yield _sse("metadata", {"run_id": run_id, "attempt": 1})


def _closing(call: Callable[[], Any]) -> Callable[[], Any]:
    def closing() -> Any:
        try:
            return call()
        finally:
            connection.close()  # not held after the response (the web process's pool is small)

    return closing


def _snapshot(
    thread_id: str, *, shown: Any, modes: set[str], since: str
) -> tuple[Any, bool, list[tuple[str, Any]], str]:
    """The thread's head, whether the run has stopped (langgraph_state.settled), and the events
    since the head last shown (none if it has not moved), with the LangGraph checkpoint they reach."""
    try:
        thread, stopped = settled(thread_id)
        failed: list[tuple[str, Any]] = []
        if thread.status == ThreadStatus.FAILED:  # as LangGraph's server ends a run that raised
            failed.append(("error", {"error": "RunError", "message": thread.error or "The run failed."}))
        if thread.head_id == shown:
            return shown, stopped, failed, since
        head = load_checkpoint(thread_id=thread_id, agent=thread.agent)
        events: list[tuple[str, Any]] = []
        if modes & {"updates", "messages-tuple", "events"}:
            ran, since = _tasks_since(head, agent=thread.agent, since=since)
            for task in ran:  # as LangGraph: a node's messages while it runs, its update at its end
                if "events" in modes:
                    events.append(("events", _chain_event("on_chain_start", task, thread_id, data={})))
                if "messages-tuple" in modes:
                    events += [("messages", message) for message in _messages(task, thread_id)]
                if "updates" in modes:
                    events.append(("updates", {task.node: task.result}))
                if "events" in modes:
                    events.append(
                        (
                            "events",
                            _chain_event("on_chain_end", task, thread_id, data={"output": task.result}),
                        )
                    )
            if "updates" in modes and ran and (interrupts := head.values.get("interrupts")):
                events.append(("updates", {"__interrupt__": shown_interrupts(interrupts)}))
        if "values" in modes:
            state = state_at(head, agent=thread.agent)
            values = state["values"]
            if stopped and thread.status == ThreadStatus.WAITING and state["interrupts"]:
                values = {**values, "__interrupt__": state["interrupts"]}  # as LangGraph's last chunk
            events.append(("values", values))
        return thread.head_id, stopped, events + failed, since
    finally:
        connection.close()  # not held between polls (the web process's pool is small)


def langgraph_head(thread_id: str) -> str:
    """The LangGraph checkpoint a thread's head stands at ("" before its first segment)."""
    agent = checkpoint_selectors.thread_agent(thread_id)
    if agent is None:
        return ""
    return str(load_checkpoint(thread_id=thread_id, agent=agent).values.get("langgraph_checkpoint") or "")


@dataclass(frozen=True)
class _Ran:
    node: str
    step: int
    result: Any
    had: frozenset[str]
    """The ids of the messages the node ran with."""

    def metadata(self, thread_id: str) -> dict[str, Any]:
        """Where the node ran, as LangGraph's streams say it beside a message or an event."""
        return {"langgraph_node": self.node, "langgraph_step": self.step, "thread_id": thread_id}


def _tasks_since(head: CheckpointData, *, agent: str, since: str) -> tuple[list[_Ran], str]:
    """What each node returned between LangGraph's checkpoint `since` and the one `head` stands
    at, oldest first, and the checkpoint reached."""
    graph = langgraph_agent(agent)
    config = graph.checkpoint_config(head.values, thread_id=head.thread_id)
    reached = config["configurable"]["checkpoint_id"]
    if not reached or reached == since:
        return [], since
    # Newest first, back along the parents (this branch) to `since`: its tasks ran in this run too.
    passed = [graph.compiled.get_state(config)]  # type: ignore[arg-type]
    while (
        passed[-1].config["configurable"]["checkpoint_id"] != since
        and passed[-1].parent_config is not None
        and len(passed) < UPDATES_LIMIT
    ):
        passed.append(graph.compiled.get_state(passed[-1].parent_config))
    ran = [
        _Ran(
            node=task.name,
            step=(snapshot.metadata or {}).get("step", -1) + 1,
            result=jsonable(task.result),
            had=frozenset(str(m.id) for m in (snapshot.values or {}).get("messages", []) if hasattr(m, "id")),
        )
        for snapshot in reversed(passed)
        for task in snapshot.tasks
        if task.result is not None and task.name != "__start__"
    ]
    return ran, reached


def _chain_event(kind: str, task: _Ran, thread_id: str, *, data: dict[str, Any]) -> dict[str, Any]:
    """A node's start or end as LangChain's astream_events (v2) reports it, from its checkpoint:
    what Agent Inbox reads to show the node a resumed run is in."""
    return {
        "event": kind,
        "name": task.node,
        "run_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"gatehouse:{thread_id}:{task.step}:{task.node}")),
        "tags": [f"graph:step:{task.step}"],
        "metadata": task.metadata(thread_id),
        "data": data,
        "parent_ids": [],
    }


def _messages(task: _Ran, thread_id: str) -> list[list[Any]]:
    """The messages a node added, as LangGraph's `messages-tuple` mode streams them: [message,
    metadata] (its update's `messages`, one message or a list, but not one it ran with and
    returned again: LangGraph tells them by id)."""
    added = task.result.get("messages") if isinstance(task.result, dict) else None
    if isinstance(added, dict):
        added = [added]
    metadata = task.metadata(thread_id)
    return [
        [message, metadata]
        for message in added or []
        if isinstance(message, dict) and str(message.get("id")) not in task.had
    ]
