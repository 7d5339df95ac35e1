"""The LangGraph server API, mounted at /langgraph: the subset LangGraph's own client
(`langgraph_sdk.get_client(url=".../langgraph", api_key=TOKEN)`) and Agent Inbox use, over
Gatehouse's LangGraph agents (one assistant per registered `LangGraphAgent`, graph_id = its name).

Assistants: search, get. Threads: create (an id; the thread starts with its first run, so
metadata other than graph_id is refused), get, search (status, metadata, ids, sort_by/sort_order),
get_state, update_state (an operator's edit of the conversation, or Agent Inbox's "mark as
resolved"), history. Runs: create, wait, stream (langgraph_stream.py; `input` starts or
continues a thread, `command={"resume": ...}` decides its pending requests as the token's user;
wait, join and stream cover a decision's undo window and the run it resumes); get, join and list
of the runs stored (an id never started here is a 404); cancel (a pending or running run, as an
operator's cancel of its thread) and delete (a run that ended). Stateless runs (/runs, /runs/wait,
/runs/stream) start a thread of their own, deleted once the run ends unless on_completion is
"keep" or a request of it waits for a reviewer. A run's options are served or
refused as langgraph_options.py says; any other filter, option or field a body names is a 422
naming it, and nothing was done; /info answers what is served.
Not served: other stream modes, crons, the store; an address not served answers a JSON 404 or 405.
"""

import re
import time
import uuid
from typing import Annotated, Any, TypeVar

from django.conf import settings
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from ninja import Query, Schema
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import APIKeyHeader
from pydantic import ConfigDict, Field

from agents.actions import InvalidInput, ThreadStateError
from agents.adapters.langgraph_agent import LangGraphAgent
from agents.loading import load_checkpoint
from agents.registry import UnknownAgent
from approvals.access import Access
from approvals.actions.errors import Conflict
from approvals.actions.langgraph_runs import (
    deciding,
    do_cancel_run,
    do_delete_run,
    do_end_stateless_run,
    do_run,
    do_update_state,
    langgraph_agent,
    langgraph_agents,
)
from approvals.actions.tokens import access_token_user
from approvals.api.base import JsonErrorsApi, token_required
from approvals.api.langgraph_options import (
    NO_CHECKPOINT_YET,
    RunIn,
    Stateless,
    check_cancel_action,
    check_run_options,
    config_checkpoint,
    named_checkpoint,
    stream_modes,
)
from approvals.api.langgraph_state import (
    RUN_STATUSES,
    STATUS,
    live_run_status,
    run_output,
    settled,
    shown_as,
    shown_run,
    state_at,
    thread_state,
)
from approvals.api.langgraph_stream import langgraph_head, run_events
from approvals.api.threads import MAX_OFFSET
from approvals.http import AuthedRequest
from approvals.models import LangGraphRun
from checkpoints import selectors as checkpoint_selectors
from checkpoints.backends import get_backend
from checkpoints.backends.base import CheckpointNotFound, CorruptCheckpoint
from checkpoints.ids import THREAD_ID_RULE, is_valid_thread_id
from checkpoints.models import Thread, ThreadStatus

METADATA_KEY = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")  # no "__": not a lookup
MAX_SEARCH_LIMIT = 100  # each thread listed loads its LangGraph state; the SDK asks for 10
THREAD_STATUSES = ("idle", "busy", "interrupted", "error")
SORTED_BY = {"created_at": "created_at", "updated_at": "updated_at", "thread_id": "id"}


class ApiKey(APIKeyHeader):
    param_name = "x-api-key"

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        user = access_token_user(key or "")
        if user is not None:
            request.user = user
        return user


api = JsonErrorsApi(
    title="Gatehouse: LangGraph server API",
    version="1",
    auth=ApiKey(),
    docs_url=None,
    docs_decorator=token_required(ApiKey(), detail="Send a valid API token: 'x-api-key: <token>'."),
    urls_namespace="langgraph",
)


def _error(request: HttpRequest, status: int, detail: str) -> HttpResponse:
    return api.create_response(request, {"detail": detail}, status=status)


@api.exception_handler(NinjaValidationError)
def invalid_body(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    unserved = [str(e["loc"][-1]) for e in exc.errors if e.get("type") == "extra_forbidden"]
    if unserved and len(unserved) == len(exc.errors):  # a filter or option this server does not apply
        return _error(request, 422, f"Not served by this server: {', '.join(unserved)}. Nothing was done.")
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


@api.exception_handler(LangGraphRun.DoesNotExist)
def unknown_run(request: HttpRequest, exc: Exception) -> HttpResponse:
    return _error(request, 404, "Run not found.")


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


class Strict(Schema):
    """A body whose every field is served: one a client sends that is not (a filter, an option)
    is a 422 naming it, not ignored (a search would list the wrong threads)."""

    model_config = ConfigDict(extra="forbid")


class SearchIn(Strict):
    limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT)] = 10
    offset: Annotated[int, Field(ge=0, le=MAX_OFFSET)] = 0


class AssistantSearchIn(SearchIn):
    graph_id: str | None = None


class ThreadSearchIn(SearchIn):
    status: str | None = None
    metadata: dict[str, Any] | None = None
    ids: Annotated[list[str], Field(max_length=MAX_SEARCH_LIMIT)] | None = None
    sort_by: str | None = None
    sort_order: str | None = None


class ThreadIn(Strict):
    thread_id: str | None = None
    metadata: dict[str, Any] | None = None
    if_exists: str = "raise"


class RunListIn(Schema):
    limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT)] = 10
    offset: Annotated[int, Field(ge=0, le=MAX_OFFSET)] = 0
    status: str | None = None
    select: list[str] | None = None


class HistoryIn(Strict):
    # Bounded as a search is (each state loads a checkpoint), refused beyond: a longer history
    # cut short without a word would read as the whole of it. Page with `before`.
    limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT)] = 10
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
    """A LangGraph agent's thread the user may see (an unknown agent's is a 404 too); one the
    user may not see is a 404 as a missing one is, before its agent is named."""
    thread = checkpoint_selectors.thread(thread_id)
    if not Access.of(request.user).can_see_thread(thread_id):
        raise Thread.DoesNotExist(thread_id)
    langgraph_agent(thread.agent)
    return thread


def _thread(thread: Thread) -> dict[str, Any]:
    try:
        state = thread_state(thread)
    except CorruptCheckpoint:  # still listed, with its status; its state is refused where asked for
        state = {"values": {}, "interrupts": []}
    interrupts = state["interrupts"]
    status = STATUS.get(ThreadStatus(thread.status), "idle")
    if status == "interrupted" and deciding(thread.pk):  # answered: its run resumes after the undo window
        status, interrupts = "busy", []
    return {
        "thread_id": thread.pk,
        "created_at": thread.created_at.isoformat(),
        "updated_at": thread.updated_at.isoformat(),
        "metadata": {**thread.metadata, "graph_id": thread.agent, "assistant_id": thread.agent},
        "status": status,
        "values": state["values"],
        "interrupts": {i["id"]: [i] for i in interrupts},
    }


def _settled(thread_id: str) -> Thread:
    """Wait until the thread stops at an unanswered gate or ends (RUN_WAIT_S at most, the undo
    window of a resume's decisions included), and return it."""
    deadline = time.monotonic() + settings.LANGGRAPH_RUN_WAIT_S
    while True:
        thread, stopped = settled(thread_id)
        if stopped or time.monotonic() > deadline:
            return thread
        time.sleep(0.2)


FLAGS = {
    "assistants": True,
    "crons": False,
    "langsmith": False,  # no run is traced to LangSmith (a run's langsmith_tracer is refused)
    "langsmith_tracing_replicas": False,
    "langsmith_tracing_session_on_runs": False,
    # A resume that answers no waiting interrupt is always refused, and changes nothing.
    "strict_resume": True,
}
"""The flags LangGraph's server answers at /info, each as this server serves it."""


@api.get("/info", auth=None)
def info(request: HttpRequest) -> Any:
    """What the server offers, as LangGraph's server tells its clients (Agent Inbox asks)."""
    return {"version": api.version, "flags": FLAGS}


@api.post("/assistants/search")
def search_assistants(request: AuthedRequest, body: AssistantSearchIn) -> Any:
    agents = langgraph_agents()
    if body.graph_id:
        agents = [a for a in agents if a.name == body.graph_id]
    return [_assistant(a) for a in agents[body.offset : body.offset + body.limit]]


@api.get("/assistants/{assistant_id}")
def get_assistant(request: AuthedRequest, assistant_id: str) -> Any:
    return _assistant(langgraph_agent(assistant_id))


@api.post("/threads")
def create_thread(request: AuthedRequest, body: ThreadIn) -> Any:
    """A thread id for the first run to start (Gatehouse threads begin with their first message).
    An id taken by a thread the user may not see is answered as a free one, as its missing
    thread would be: only operators start threads, and they see every thread (and get the 409)."""
    if body.if_exists not in ("raise", "do_nothing"):
        raise InvalidInput({"if_exists": "'raise' or 'do_nothing'"})
    if body.thread_id is not None and not is_valid_thread_id(body.thread_id):
        raise InvalidInput({"thread_id": THREAD_ID_RULE})
    # Nothing is stored before the first run creates the thread: metadata given here would be
    # lost (a search by it would not find the thread), so it is refused, not dropped.
    if set(body.metadata or {}) - {"graph_id"}:
        raise InvalidInput(
            {"metadata": "not stored: a thread begins with its first run; only graph_id is taken here"}
        )
    if graph_id := (body.metadata or {}).get("graph_id"):
        langgraph_agent(str(graph_id))  # an unknown one is a 404, as at runs.create
    access = Access.of(request.user)
    if (
        body.thread_id
        and checkpoint_selectors.thread_exists(body.thread_id)
        and access.can_see_thread(body.thread_id)
    ):
        if body.if_exists != "do_nothing":
            return _error(request, 409, f"Thread {body.thread_id} already exists.")
        return _thread(_visible(request, body.thread_id))
    thread_id = body.thread_id or str(uuid.uuid4())
    return {
        "thread_id": thread_id,
        "created_at": None,
        "updated_at": None,
        "metadata": body.metadata or {},  # graph_id at most
        "status": "idle",
        "values": None,
        "interrupts": {},
    }


@api.post("/threads/search")
def search_threads(request: AuthedRequest, body: ThreadSearchIn) -> Any:
    if body.status is not None and body.status not in THREAD_STATUSES:
        raise InvalidInput({"status": f"one of {', '.join(THREAD_STATUSES)}"})
    if body.sort_by is not None and body.sort_by not in SORTED_BY:
        raise InvalidInput({"sort_by": f"one of {', '.join(SORTED_BY)}"})
    if body.sort_order not in (None, "asc", "desc"):
        raise InvalidInput({"sort_order": "'asc' or 'desc'"})
    names = [a.name for a in langgraph_agents()]
    order = SORTED_BY[body.sort_by or "updated_at"]
    order = order if body.sort_order == "asc" else f"-{order}"
    rows = Access.of(request.user).visible_threads().filter(agent__in=names).order_by(order, "id")
    if body.ids is not None:
        rows = rows.filter(pk__in=body.ids)
    if body.status:
        rows = shown_as(rows, status=body.status)
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
    return thread_state(_visible(request, thread_id))


@api.post("/threads/{thread_id}/state")
def update_state(request: AuthedRequest, thread_id: str, body: UpdateStateIn) -> Any:
    """An edit of the thread's conversation (an operator's), reduced as LangGraph's add_messages;
    no values as the graph's end ends the thread (Agent Inbox's "mark as resolved")."""
    thread = _visible(request, thread_id)
    written = do_update_state(
        user=request.user,
        thread_id=thread_id,
        values=body.values,
        as_node=body.as_node,
        checkpoint_id=named_checkpoint(body.checkpoint_id, body.checkpoint),
    )
    state = state_at(written.checkpoint, agent=thread.agent) if written else thread_state(thread)
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
    summaries = get_backend().history(thread_id=thread_id, limit=body.limit, before=before)
    return [
        state_at(
            load_checkpoint(thread_id=thread_id, checkpoint_id=s.id, agent=thread.agent), agent=thread.agent
        )
        for s in summaries
    ]


@api.post("/threads/{thread_id}/runs")
def create_run(request: AuthedRequest, thread_id: str, body: RunIn) -> Any:
    run = _start(request, thread_id, body)
    shown = shown_run(run, thread=checkpoint_selectors.thread(thread_id), live="pending")
    return _located(api.create_response(request, shown, status=200), run)


@api.get("/threads/{thread_id}/runs")
def list_runs(request: AuthedRequest, thread_id: str, filters: Query[RunListIn]) -> Any:
    """The thread's runs started here, newest first."""
    _visible(request, thread_id)
    if filters.status is not None and filters.status not in RUN_STATUSES:
        raise InvalidInput({"status": f"one of {', '.join(RUN_STATUSES)}"})
    if filters.select:
        raise InvalidInput({"select": "not served by this server: runs come whole"})
    thread, live = live_run_status(thread_id)
    rows = LangGraphRun.objects.filter(thread_id=thread_id)
    if filters.status is not None:  # an earlier run by how it ended, the latest by the thread
        latest = Q(outcome="") if live == filters.status else Q(pk__in=[])
        rows = rows.filter(Q(outcome=filters.status) | latest)
    page = rows[filters.offset : filters.offset + filters.limit]
    return [shown_run(run, thread=thread, live=live) for run in page]


@api.post("/threads/{thread_id}/runs/wait")
def wait_run(request: AuthedRequest, thread_id: str, body: RunIn) -> HttpResponse:
    """The run's output once it stopped (run_output). `Location` names its join, where LangGraph's
    client asks again if the answer is cut off (by a proxy's timeout, say)."""
    run = _start(request, thread_id, body)
    response = api.create_response(request, run_output(_settled(thread_id)), status=200)
    response["Location"] = f"/threads/{thread_id}/runs/{run.id}/join"
    return _located(response, run)


@api.post("/threads/{thread_id}/runs/stream")
def stream_run(request: AuthedRequest, thread_id: str, body: RunIn) -> StreamingHttpResponse:
    """Server-sent events: the run's metadata, then after each step the thread's values, each
    node's update and/or each message a node added (LangGraph's own, read from its checkpoints),
    until the run stops at a gate or ends (LANGGRAPH_RUN_WAIT_S at most); a run that failed ends
    with an `error` event saying why. Messages come whole when their step commits, as LangGraph
    streams a message it did not stream token by token."""
    modes = stream_modes(body)
    since = langgraph_head(thread_id)  # before the run starts: its updates are what comes after
    run = _start(request, thread_id, body)
    response = StreamingHttpResponse(
        run_events(thread_id, str(run.id), modes=modes, since=since), content_type="text/event-stream"
    )
    response["Cache-Control"] = "no-store"
    return _located(response, run)


@api.get("/threads/{thread_id}/runs/{run_id}/join")
def join_run(request: AuthedRequest, thread_id: str, run_id: str) -> Any:
    """The thread's values once the run stopped: at once for a run a later one followed."""
    thread = _visible(request, thread_id)
    if _stored_run(thread_id, run_id).outcome:
        return thread_state(thread)["values"]
    return run_output(_settled(thread_id))


@api.get("/threads/{thread_id}/runs/{run_id}")
def get_run(request: AuthedRequest, thread_id: str, run_id: str) -> Any:
    _visible(request, thread_id)
    run = _stored_run(thread_id, run_id)
    thread, live = live_run_status(thread_id)
    return shown_run(run, thread=thread, live=live)


@api.post("/threads/{thread_id}/runs/{run_id}/cancel", response={204: None})
def cancel_run(
    request: AuthedRequest, thread_id: str, run_id: str, action: str = "interrupt", wait: bool = False
) -> Any:
    """Cancel a pending or running run: done when answered, so `wait` has nothing to wait for."""
    _visible(request, thread_id)
    run = _stored_run(thread_id, run_id)
    check_cancel_action(action)
    do_cancel_run(run, user=request.user)
    return 204, None


@api.delete("/threads/{thread_id}/runs/{run_id}", response={204: None})
def delete_run(request: AuthedRequest, thread_id: str, run_id: str) -> Any:
    _visible(request, thread_id)
    do_delete_run(_stored_run(thread_id, run_id), user=request.user)
    return 204, None


@api.post("/runs")
def create_stateless_run(request: AuthedRequest, body: RunIn) -> Any:
    """A run on a thread of its own, in the background: its thread is kept (on_completion
    "keep"; "delete", the default, is refused, as nothing here would see the run end)."""
    run = _start_stateless(request, body, stateless="background")
    response = api.create_response(
        request, shown_run(run, thread=checkpoint_selectors.thread(run.thread_id), live="pending"), status=200
    )
    return _located(response, run)


@api.post("/runs/wait")
def wait_stateless_run(request: AuthedRequest, body: RunIn) -> HttpResponse:
    """A run on a thread of its own: the values where it stopped. Its thread is then deleted if
    the run ended (on_completion "delete", the default), or kept: asked to, stopped at a gate (a
    request waits for a reviewer), or still running when LANGGRAPH_RUN_WAIT_S ran out."""
    run = _start_stateless(request, body, stateless="wait")
    values = run_output(_settled(run.thread_id))
    if body.on_completion != "keep":
        do_end_stateless_run(run, user=request.user)
    return _located(api.create_response(request, values, status=200), run)


@api.post("/runs/stream")
def stream_stateless_run(request: AuthedRequest, body: RunIn) -> StreamingHttpResponse:
    """runs.stream on a thread of its own, deleted as runs.wait's is once the stream saw the run
    end (a stream cut short, by its time or its client, leaves it kept)."""
    modes = stream_modes(body)
    run = _start_stateless(request, body, stateless="wait")
    user = request.user
    then = None if body.on_completion == "keep" else lambda: do_end_stateless_run(run, user=user)
    response = StreamingHttpResponse(
        run_events(run.thread_id, str(run.id), modes=modes, since="", then=then),
        content_type="text/event-stream",
    )
    response["Cache-Control"] = "no-store"
    return _located(response, run)


Response = TypeVar("Response", bound=HttpResponseBase)


def _located(response: Response, run: LangGraphRun) -> Response:
    """Where the run is, as LangGraph's server says it (its client's `on_run_created` reads it):
    a client finds the thread a stateless run kept (stopped at a gate, say) from there."""
    response["Content-Location"] = f"/threads/{run.thread_id}/runs/{run.id}"
    return response


def _start_stateless(request: AuthedRequest, body: RunIn, *, stateless: Stateless) -> LangGraphRun:
    """Start a run on a new thread, with the rights of any start (an operator's or an admin's).
    `if_not_exists` is moot (the thread is always made), as on LangGraph's server."""
    thread_id = str(uuid.uuid4())
    check_run_options(body, graph=langgraph_agent(body.assistant_id).compiled, stateless=stateless)
    if config_checkpoint(body.config, thread_id=thread_id) is not None:  # its ids, the new thread's
        raise InvalidInput({"config.configurable.checkpoint_id": NO_CHECKPOINT_YET})
    return do_run(
        user=request.user,
        thread_id=thread_id,
        assistant=body.assistant_id,
        graph_input=body.input,
        metadata=body.metadata,
    )


def _stored_run(thread_id: str, run_id: str) -> LangGraphRun:
    """The run `run_id` of the thread, or LangGraphRun.DoesNotExist (a 404): an id never started
    here, not a run id at all, or another thread's run."""
    try:
        return LangGraphRun.objects.get(pk=uuid.UUID(run_id), thread_id=thread_id)
    except ValueError as exc:
        raise LangGraphRun.DoesNotExist(run_id) from exc


def _start(request: AuthedRequest, thread_id: str, body: RunIn) -> LangGraphRun:
    # A thread the user may not see is left to do_run, which answers as for a missing one.
    exists = checkpoint_selectors.thread_exists(thread_id)
    visible = exists and Access.of(request.user).can_see_thread(thread_id)
    if visible:
        _visible(request, thread_id)
    check_run_options(body, graph=langgraph_agent(body.assistant_id).compiled)
    # A thread begins with its first run (threads.create stores nothing), so a run on a new id
    # starts it unless the client said to refuse a thread that does not exist yet.
    if body.if_not_exists == "reject" and not visible:
        raise Thread.DoesNotExist(thread_id)
    resume = (body.command or {}).get("resume")
    if body.command and resume is None:
        raise InvalidInput({"command": "only command={'resume': ...} is served"})
    named = config_checkpoint(body.config, thread_id=thread_id)
    return do_run(
        user=request.user,
        thread_id=thread_id,
        assistant=body.assistant_id,
        graph_input=body.input,
        resume=resume,
        checkpoint_id=named_checkpoint(body.checkpoint_id, body.checkpoint) or named,
        metadata=body.metadata,
    )
