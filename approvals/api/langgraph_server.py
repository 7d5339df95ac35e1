"""The LangGraph server API, mounted at /langgraph: the subset LangGraph's own client
(`langgraph_sdk.get_client(url=".../langgraph", api_key=TOKEN)`) and Agent Inbox use, over
Gatehouse's LangGraph agents (one assistant per registered `LangGraphAgent`, graph_id = its name).

Assistants: search, get. Threads: create (an id; the thread starts with its first run), get,
search, get_state, history. Runs: create, wait, join, stream in `values` and `updates` modes
(`input` starts or continues a thread, `command={"resume": ...}` decides its pending requests as
the token's user). Not served: other stream modes, crons, the store, update_state (operators edit a thread's
conversation in the console or the HTTP API).
"""

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from ninja import NinjaAPI, Schema
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import APIKeyHeader

from agents.actions import InvalidInput, ThreadStateError
from agents.adapters.langgraph_agent import LangGraphAgent
from agents.loading import load_checkpoint
from agents.registry import UnknownAgent
from approvals.access import Access
from approvals.actions.errors import Conflict
from approvals.actions.langgraph_runs import do_run, do_update_state, langgraph_agent, langgraph_agents
from approvals.actions.tokens import access_token_user
from approvals.http import AuthedRequest
from checkpoints import selectors as checkpoint_selectors
from checkpoints.backends import get_backend
from checkpoints.backends.base import CheckpointData, CheckpointError, CheckpointNotFound, CorruptCheckpoint
from checkpoints.models import Thread, ThreadStatus

log = logging.getLogger(__name__)

SETTLED = {ThreadStatus.WAITING, ThreadStatus.DONE, ThreadStatus.FAILED, ThreadStatus.CANCELLED}
STATUS = {  # Gatehouse's thread status as LangGraph's
    ThreadStatus.RUNNING: "busy",
    ThreadStatus.PAUSED: "busy",
    ThreadStatus.WAITING: "interrupted",
    ThreadStatus.DONE: "idle",
    ThreadStatus.CANCELLED: "idle",
    ThreadStatus.FAILED: "error",
}
METADATA_KEY = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")  # no "__": not a lookup
STREAM_MODES = {"values", "updates", "messages-tuple", "events"}
UPDATES_LIMIT = 200  # LangGraph checkpoints one poll reads back at most
RUN_STATUS = {"busy": "running", "interrupted": "interrupted", "idle": "success", "error": "error"}


class ApiKey(APIKeyHeader):
    param_name = "x-api-key"

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        user = access_token_user(key or "")
        if user is not None:
            request.user = user
        return user


api = NinjaAPI(
    title="Gatehouse: LangGraph server API",
    version="1",
    auth=ApiKey(),
    docs_url=None,
    urls_namespace="langgraph",
)


def _error(request: HttpRequest, status: int, detail: str) -> HttpResponse:
    return api.create_response(request, {"detail": detail}, status=status)


@api.exception_handler(NinjaValidationError)
def invalid_body(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    return _error(request, 422, f"The request is not valid: {exc.errors}")


@api.exception_handler(InvalidInput)
def invalid_input(request: HttpRequest, exc: InvalidInput) -> HttpResponse:
    return _error(request, 422, "; ".join(f"{k}: {v}" for k, v in exc.errors.items()))


@api.exception_handler(UnknownAgent)
def unknown_assistant(request: HttpRequest, exc: UnknownAgent) -> HttpResponse:
    return _error(request, 404, str(exc))


@api.exception_handler(Thread.DoesNotExist)
def unknown_thread(request: HttpRequest, exc: Exception) -> HttpResponse:
    return _error(request, 404, "Thread not found.")


@api.exception_handler(CheckpointNotFound)
def unknown_checkpoint(request: HttpRequest, exc: CheckpointNotFound) -> HttpResponse:
    return _error(request, 404, "Checkpoint not found.")


@api.exception_handler(CorruptCheckpoint)
def corrupt_checkpoint(request: HttpRequest, exc: CorruptCheckpoint) -> HttpResponse:
    return _error(request, 409, str(exc))


@api.exception_handler(Conflict)
def conflict(request: HttpRequest, exc: Conflict) -> HttpResponse:
    return _error(request, 409, str(exc))


@api.exception_handler(ThreadStateError)
def wrong_status(request: HttpRequest, exc: ThreadStateError) -> HttpResponse:
    return _error(request, 409, str(exc))


@api.exception_handler(PermissionError)
def forbidden(request: HttpRequest, exc: PermissionError) -> HttpResponse:
    return _error(request, 403, str(exc))


class UpdateStateIn(Schema):
    values: Any = None
    as_node: str | None = None
    checkpoint: dict[str, Any] | None = None
    checkpoint_id: str | None = None


class SearchIn(Schema):
    graph_id: str | None = None
    status: str | None = None
    metadata: dict[str, Any] | None = None
    limit: int = 10
    offset: int = 0


class ThreadIn(Schema):
    thread_id: str | None = None
    metadata: dict[str, Any] | None = None
    if_exists: str = "raise"


class RunIn(Schema):
    assistant_id: str
    input: Any = None
    command: dict[str, Any] | None = None


class StreamRunIn(RunIn):
    stream_mode: str | list[str] = "values"


class HistoryIn(Schema):
    limit: int = 10
    before: str | dict[str, Any] | None = None


def _assistant(agent: LangGraphAgent) -> dict[str, Any]:
    return {
        "assistant_id": agent.name,
        "graph_id": agent.name,
        "name": agent.name,
        "description": agent.description,
        "config": {},
        "context": {},
        "metadata": {},
        "version": 1,
        "created_at": None,
        "updated_at": None,
    }


def _visible(request: AuthedRequest, thread_id: str) -> Thread:
    """A LangGraph agent's thread the user may see (an unknown agent's is a 404 too)."""
    thread = checkpoint_selectors.thread(thread_id)
    langgraph_agent(thread.agent)
    if not Access.of(request.user).can_see_thread(thread_id):
        raise Thread.DoesNotExist(thread_id)
    return thread


def _state(thread: Thread) -> dict[str, Any]:
    """The thread's state as LangGraph's server shows it, read from its head checkpoint."""
    return _state_at(load_checkpoint(thread_id=thread.pk, agent=thread.agent), agent=thread.agent)


def _state_at(checkpoint: CheckpointData, *, agent: str) -> dict[str, Any]:
    """A checkpoint of a LangGraph agent's thread as LangGraph's server shows a state."""
    graph = langgraph_agent(agent)
    interrupts = checkpoint.values.get("interrupts") or []
    config = graph.checkpoint_config(checkpoint.values, thread_id=checkpoint.thread_id)
    values: dict[str, Any] = {"messages": checkpoint.values.get("messages", [])}
    if config["configurable"]["checkpoint_id"]:
        snapshot = graph.compiled.get_state(config)  # type: ignore[arg-type]
        values = {k: _jsonable(v) for k, v in (snapshot.values or {}).items()}
    if checkpoint.values.get("pending_edit"):  # edited here, written to LangGraph by the next step
        values["messages"] = graph.shown_as_langchain(checkpoint.values.get("messages", []))
    tasks = [{"id": i["id"], "name": "interrupt", "interrupts": [i], "error": None} for i in interrupts]
    return {
        "values": values,
        "next": checkpoint.next,
        "tasks": tasks,
        "interrupts": list(interrupts),
        # Gatehouse's id beside LangGraph's, so a state's checkpoint pages history (`before`).
        "checkpoint": {**config["configurable"], "gatehouse_checkpoint": checkpoint.id},
        "metadata": {"gatehouse_checkpoint": checkpoint.id, "step": checkpoint.step},
        "created_at": checkpoint.created_at.isoformat() if checkpoint.created_at else None,
        "parent_checkpoint": None,
    }


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def _thread(thread: Thread) -> dict[str, Any]:
    try:
        state = _state(thread)
    except CorruptCheckpoint:  # still listed, with its status; its state is refused where asked for
        state = {"values": {}, "interrupts": []}
    interrupts = state["interrupts"]
    return {
        "thread_id": thread.pk,
        "created_at": thread.created_at.isoformat(),
        "updated_at": thread.updated_at.isoformat(),
        "metadata": {**thread.metadata, "graph_id": thread.agent, "assistant_id": thread.agent},
        "status": STATUS.get(ThreadStatus(thread.status), "idle"),
        "values": state["values"],
        "interrupts": {i["id"]: [i] for i in interrupts},
    }


def _run(thread_id: str, assistant_id: str, status: str) -> dict[str, Any]:
    return {
        "run_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"gatehouse:{thread_id}:{time.time_ns()}")),
        "thread_id": thread_id,
        "assistant_id": assistant_id,
        "status": status,
        "metadata": {},
        "multitask_strategy": "reject",
        "created_at": None,
        "updated_at": None,
        "kwargs": {},
    }


def _settled(thread_id: str) -> Thread:
    """Wait until the thread stops at a gate or ends (RUN_WAIT_S at most), and return it."""
    deadline = time.monotonic() + settings.LANGGRAPH_RUN_WAIT_S
    while True:
        thread = checkpoint_selectors.thread(thread_id)
        if thread.status in SETTLED or time.monotonic() > deadline:
            return thread
        time.sleep(0.2)


@api.post("/assistants/search")
def search_assistants(request: AuthedRequest, body: SearchIn) -> Any:
    agents = langgraph_agents()
    if body.graph_id:
        agents = [a for a in agents if a.name == body.graph_id]
    return [_assistant(a) for a in agents[body.offset : body.offset + body.limit]]


@api.get("/assistants/{assistant_id}")
def get_assistant(request: AuthedRequest, assistant_id: str) -> Any:
    return _assistant(langgraph_agent(assistant_id))


@api.post("/threads")
def create_thread(request: AuthedRequest, body: ThreadIn) -> Any:
    """A thread id for the first run to start (Gatehouse threads begin with their first message)."""
    if body.thread_id and checkpoint_selectors.thread_exists(body.thread_id):
        if body.if_exists != "do_nothing":
            return _error(request, 409, f"Thread {body.thread_id} already exists.")
        return _thread(_visible(request, body.thread_id))
    thread_id = body.thread_id or str(uuid.uuid4())
    return {
        "thread_id": thread_id,
        "created_at": None,
        "updated_at": None,
        "metadata": body.metadata or {},
        "status": "idle",
        "values": None,
        "interrupts": {},
    }


@api.post("/threads/search")
def search_threads(request: AuthedRequest, body: SearchIn) -> Any:
    names = [a.name for a in langgraph_agents()]
    rows = Access.of(request.user).visible_threads().filter(agent__in=names).order_by("-updated_at")
    if body.status:
        rows = rows.filter(status__in=[s for s, lg in STATUS.items() if lg == body.status])
    for key, value in (body.metadata or {}).items():
        if not METADATA_KEY.match(key):
            raise InvalidInput({"metadata": f"{key!r} is not a metadata key this server searches"})
        if key in ("graph_id", "assistant_id"):
            rows = rows.filter(agent=value)
        else:
            rows = rows.filter(**{f"metadata__{key}": value})
    return [_thread(t) for t in rows.select_related("head")[body.offset : body.offset + body.limit]]


@api.get("/threads/{thread_id}")
def get_thread(request: AuthedRequest, thread_id: str) -> Any:
    return _thread(_visible(request, thread_id))


@api.get("/threads/{thread_id}/state")
def get_state(request: AuthedRequest, thread_id: str) -> Any:
    return _state(_visible(request, thread_id))


@api.post("/threads/{thread_id}/state")
def update_state(request: AuthedRequest, thread_id: str, body: UpdateStateIn) -> Any:
    """An edit of the thread's conversation (an operator's), reduced as LangGraph's add_messages;
    no values as the graph's end ends the thread (Agent Inbox's "mark as resolved")."""
    thread = _visible(request, thread_id)
    given = body.checkpoint or {}
    written = do_update_state(
        user=request.user,
        thread_id=thread_id,
        values=body.values,
        as_node=body.as_node,
        checkpoint_id=body.checkpoint_id or given.get("gatehouse_checkpoint") or given.get("checkpoint_id"),
    )
    state = _state_at(written.checkpoint, agent=thread.agent) if written else _state(thread)
    return {"checkpoint": state["checkpoint"]}


@api.post("/threads/{thread_id}/history")
def get_history(request: AuthedRequest, thread_id: str, body: HistoryIn) -> Any:
    """The thread's checkpoints, newest first (Gatehouse's, each as a LangGraph state)."""
    thread = _visible(request, thread_id)
    before = body.before
    if isinstance(before, dict):
        before = before.get("gatehouse_checkpoint")
        if not before:
            raise InvalidInput({"before": "pass a state's checkpoint as this server returned it"})
    limit = max(1, min(body.limit, 100))
    backend = get_backend()
    summaries = backend.history(thread_id=thread_id, limit=limit, before=before)
    return [
        _state_at(
            load_checkpoint(thread_id=thread_id, checkpoint_id=s.id, agent=thread.agent), agent=thread.agent
        )
        for s in summaries
    ]


@api.post("/threads/{thread_id}/runs")
def create_run(request: AuthedRequest, thread_id: str, body: RunIn) -> Any:
    _start(request, thread_id, body)
    return _run(thread_id, body.assistant_id, "pending")


@api.post("/threads/{thread_id}/runs/wait")
def wait_run(request: AuthedRequest, thread_id: str, body: RunIn) -> Any:
    _start(request, thread_id, body)
    return _state(_settled(thread_id))["values"]


@api.post("/threads/{thread_id}/runs/stream")
def stream_run(request: AuthedRequest, thread_id: str, body: StreamRunIn) -> StreamingHttpResponse:
    """Server-sent events: the run's metadata, then after each step the thread's values, each
    node's update and/or each message a node added (LangGraph's own, read from its checkpoints),
    until the run stops at a gate or ends (LANGGRAPH_RUN_WAIT_S at most); a run that failed ends
    with an `error` event saying why. Messages come whole when their step commits, as LangGraph
    streams a message it did not stream token by token."""
    modes = {body.stream_mode} if isinstance(body.stream_mode, str) else set(body.stream_mode)
    if not modes or modes - STREAM_MODES:
        raise InvalidInput({"stream_mode": "served: 'values', 'updates', 'messages-tuple' and 'events'"})
    since = _langgraph_head(thread_id)  # before the run starts: its updates are what comes after
    _start(request, thread_id, body)
    run = _run(thread_id, body.assistant_id, "pending")
    response = StreamingHttpResponse(
        _events(thread_id, run["run_id"], modes=modes, since=since), content_type="text/event-stream"
    )
    response["Cache-Control"] = "no-store"
    return response


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


async def _events(thread_id: str, run_id: str, *, modes: set[str], since: str) -> AsyncIterator[bytes]:
    """An async iterator, so daphne sends each event as it comes (a sync one is read whole first)."""
    yield _sse("metadata", {"run_id": run_id, "attempt": 1})
    deadline = time.monotonic() + settings.LANGGRAPH_RUN_WAIT_S
    shown: Any = None
    while True:
        try:
            shown, status, events, since = await sync_to_async(_snapshot)(
                thread_id, shown=shown, modes=modes, since=since
            )
        except Exception as exc:  # the response has begun: an error event is the only way to say so
            log.exception("the stream of thread %s failed", thread_id)
            failure = str(exc) if isinstance(exc, CheckpointError) else "the thread's state could not be read"
            yield _sse("error", {"error": type(exc).__name__, "message": failure})
            return
        for event, data in events:
            yield _sse(event, data)
        if status in SETTLED or time.monotonic() > deadline:
            return
        await asyncio.sleep(0.2)


def _snapshot(
    thread_id: str, *, shown: Any, modes: set[str], since: str
) -> tuple[Any, str, list[tuple[str, Any]], str]:
    """The thread's head and status, and the events since the head last shown (none if it has not
    moved), with the LangGraph checkpoint they reach."""
    try:
        thread = checkpoint_selectors.thread(thread_id)
        failed: list[tuple[str, Any]] = []
        if thread.status == ThreadStatus.FAILED:  # as LangGraph's server ends a run that raised
            failed.append(("error", {"error": "RunError", "message": thread.error or "The run failed."}))
        if thread.head_id == shown:
            return shown, thread.status, failed, since
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
                events.append(("updates", {"__interrupt__": list(interrupts)}))
        if "values" in modes:
            events.append(("values", _state_at(head, agent=thread.agent)["values"]))
        return thread.head_id, thread.status, events + failed, since
    finally:
        connection.close()  # not held between polls (the web process's pool is small)


def _langgraph_head(thread_id: str) -> str:
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
            result=_jsonable(task.result),
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
        "metadata": {"langgraph_node": task.node, "langgraph_step": task.step, "thread_id": thread_id},
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
    metadata = {"langgraph_node": task.node, "langgraph_step": task.step, "thread_id": thread_id}
    return [
        [message, metadata]
        for message in added or []
        if isinstance(message, dict) and str(message.get("id")) not in task.had
    ]


@api.get("/threads/{thread_id}/runs/{run_id}/join")
def join_run(request: AuthedRequest, thread_id: str, run_id: str) -> Any:
    _visible(request, thread_id)
    return _state(_settled(thread_id))["values"]


@api.get("/threads/{thread_id}/runs/{run_id}")
def get_run(request: AuthedRequest, thread_id: str, run_id: str) -> Any:
    thread = _visible(request, thread_id)
    return _run(thread_id, thread.agent, RUN_STATUS[STATUS[ThreadStatus(thread.status)]]) | {"run_id": run_id}


def _start(request: AuthedRequest, thread_id: str, body: RunIn) -> None:
    if checkpoint_selectors.thread_exists(thread_id):
        _visible(request, thread_id)
    resume = (body.command or {}).get("resume")
    if body.command and resume is None:
        raise InvalidInput({"command": "only command={'resume': ...} is served"})
    do_run(
        user=request.user,
        thread_id=thread_id,
        assistant=body.assistant_id,
        graph_input=body.input,
        resume=resume,
    )
