"""Runs on a thread of the LangGraph server API: create, wait, stream (`input` starts or
continues a thread, `command={"resume": ...}` decides its pending requests as the token's user;
wait, join and stream cover a decision's undo window and the run it resumes); get, join,
join_stream and list of the runs stored (an id never started here is a 404); cancel (a pending
or running run, as an operator's cancel of its thread) and delete (a run that ended)."""

import time
import uuid
from typing import Annotated, Any, TypeVar

from django.conf import settings
from django.db.models import Q
from django.http import HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from ninja import Query, Schema
from pydantic import Field

from agents.actions import InvalidInput
from approvals.access import Access
from approvals.actions.langgraph_runs import do_cancel_run, do_delete_run, do_run, langgraph_agent
from approvals.api.langgraph_api import MAX_SEARCH_LIMIT, api
from approvals.api.langgraph_options import (
    RunIn,
    check_cancel_action,
    check_run_options,
    config_checkpoint,
    joined_stream_modes,
    named_checkpoint,
    stream_modes,
)
from approvals.api.langgraph_state import (
    RUN_STATUSES,
    live_run_status,
    run_output,
    settled,
    shown_run,
    thread_state,
)
from approvals.api.langgraph_stream import ended_run_events, langgraph_head, run_events
from approvals.api.langgraph_threads import visible
from approvals.api.threads import MAX_OFFSET
from approvals.http import AuthedRequest
from approvals.models import LangGraphRun
from checkpoints import selectors as checkpoint_selectors
from checkpoints.models import Thread


class RunListIn(Schema):
    limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT)] = 10
    offset: Annotated[int, Field(ge=0, le=MAX_OFFSET)] = 0
    status: str | None = None
    select: list[str] | None = None


class JoinStreamIn(Schema):
    stream_mode: list[str] | None = None
    cancel_on_disconnect: bool = False


def settled_thread(thread_id: str) -> Thread:
    """Wait until the thread stops at an unanswered gate or ends (RUN_WAIT_S at most, the undo
    window of a resume's decisions included), and return it."""
    deadline = time.monotonic() + settings.LANGGRAPH_RUN_WAIT_S
    while True:
        thread, stopped = settled(thread_id)
        if stopped or time.monotonic() > deadline:
            return thread
        time.sleep(0.2)


@api.post("/threads/{thread_id}/runs")
def create_run(request: AuthedRequest, thread_id: str, body: RunIn) -> Any:
    run = _start(request, thread_id, body)
    shown = shown_run(run, thread=checkpoint_selectors.thread(thread_id), live="pending")
    return located(api.create_response(request, shown, status=200), run)


@api.get("/threads/{thread_id}/runs")
def list_runs(request: AuthedRequest, thread_id: str, filters: Query[RunListIn]) -> Any:
    """The thread's runs started here, newest first."""
    visible(request, thread_id)
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
    response = api.create_response(request, run_output(settled_thread(thread_id)), status=200)
    response["Location"] = f"/threads/{thread_id}/runs/{run.id}/join"
    return located(response, run)


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
    return located(event_stream(run_events(thread_id, str(run.id), modes=modes, since=since)), run)


@api.get("/threads/{thread_id}/runs/{run_id}/stream")
def join_stream(
    request: AuthedRequest, thread_id: str, run_id: str, filters: Query[JoinStreamIn]
) -> StreamingHttpResponse:
    """runs.join_stream: the run's events from now on, as runs.stream sends them, until it stops
    (what came before is not replayed, as on LangGraph's server). A run a later one followed has
    ended: its stream is its metadata alone. A background stateless run's thread deleted as the
    run ended ends the stream as the run's end does."""
    visible(request, thread_id)
    run = _stored_run(thread_id, run_id)
    modes = joined_stream_modes(
        filters.stream_mode,
        cancel_on_disconnect=filters.cancel_on_disconnect,
        last_event_id=request.headers.get("Last-Event-ID"),
    )
    if run.outcome:
        return located(event_stream(ended_run_events(str(run.id))), run)
    since = langgraph_head(thread_id)
    events = run_events(thread_id, str(run.id), modes=modes, since=since, gone_ends=run.deletes_thread)
    return located(event_stream(events), run)


@api.get("/threads/{thread_id}/runs/{run_id}/join")
def join_run(request: AuthedRequest, thread_id: str, run_id: str) -> Any:
    """The thread's values once the run stopped: at once for a run a later one followed."""
    thread = visible(request, thread_id)
    if _stored_run(thread_id, run_id).outcome:
        return thread_state(thread)["values"]
    return run_output(settled_thread(thread_id))


@api.get("/threads/{thread_id}/runs/{run_id}")
def get_run(request: AuthedRequest, thread_id: str, run_id: str) -> Any:
    visible(request, thread_id)
    run = _stored_run(thread_id, run_id)
    thread, live = live_run_status(thread_id)
    return shown_run(run, thread=thread, live=live)


@api.post("/threads/{thread_id}/runs/{run_id}/cancel", response={204: None})
def cancel_run(
    request: AuthedRequest, thread_id: str, run_id: str, action: str = "interrupt", wait: bool = False
) -> Any:
    """Cancel a pending or running run: done when answered, so `wait` has nothing to wait for."""
    visible(request, thread_id)
    run = _stored_run(thread_id, run_id)
    check_cancel_action(action)
    do_cancel_run(run, user=request.user)
    return 204, None


@api.delete("/threads/{thread_id}/runs/{run_id}", response={204: None})
def delete_run(request: AuthedRequest, thread_id: str, run_id: str) -> Any:
    visible(request, thread_id)
    do_delete_run(_stored_run(thread_id, run_id), user=request.user)
    return 204, None


Response = TypeVar("Response", bound=HttpResponseBase)


def located(response: Response, run: LangGraphRun) -> Response:
    """Where the run is, as LangGraph's server says it (its client's `on_run_created` reads it):
    a client finds the thread a stateless run kept (stopped at a gate, say) from there."""
    response["Content-Location"] = f"/threads/{run.thread_id}/runs/{run.id}"
    return response


def event_stream(events: Any) -> StreamingHttpResponse:
    """Server-sent events, each sent as it comes (`events`: an async iterator of them)."""
    response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["Cache-Control"] = "no-store"
    return response


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
    is_visible = exists and Access.of(request.user).can_see_thread(thread_id)
    if is_visible:
        visible(request, thread_id)
    check_run_options(body, graph=langgraph_agent(body.assistant_id).compiled)
    # A thread begins with its first run (threads.create stores nothing), so a run on a new id
    # starts it unless the client said to refuse a thread that does not exist yet.
    if body.if_not_exists == "reject" and not is_visible:
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
