"""Stateless runs of the LangGraph server API (/runs, /runs/wait, /runs/stream): each starts a
thread of its own, with the rights of any start, deleted once the run ends unless on_completion
is "keep" or it stopped at a gate for a reviewer (do_end_stateless_run). A wait or a stream
deletes it when it sees the run end; a background run's is deleted by the worker, as the run's
end commits (langgraph_runs.on_thread_changed)."""

import uuid
from typing import Any

from django.http import HttpResponse, StreamingHttpResponse

from agents.actions import InvalidInput
from approvals.actions.langgraph_runs import do_end_stateless_run, do_run, langgraph_agent
from approvals.api.langgraph_api import api
from approvals.api.langgraph_options import (
    NO_CHECKPOINT_YET,
    RunIn,
    Stateless,
    check_run_options,
    config_checkpoint,
    stream_modes,
)
from approvals.api.langgraph_state import run_output, shown_run
from approvals.api.langgraph_stream import run_events
from approvals.api.langgraph_thread_runs import event_stream, located, settled_thread
from approvals.http import AuthedRequest
from approvals.models import LangGraphRun
from checkpoints import selectors as checkpoint_selectors


@api.post("/runs")
def create_stateless_run(request: AuthedRequest, body: RunIn) -> Any:
    """A run on a thread of its own, in the background: its thread is deleted by the worker once
    the run ends (on_completion "delete", the default), or kept ("keep")."""
    run = _start_stateless(request, body, stateless="background")
    # Its thread may be gone already: the worker may have run it to its end, and deleted it.
    thread = checkpoint_selectors.all_threads().filter(pk=run.thread_id).first()
    return located(
        api.create_response(request, shown_run(run, thread=thread, live="pending"), status=200), run
    )


@api.post("/runs/wait")
def wait_stateless_run(request: AuthedRequest, body: RunIn) -> HttpResponse:
    """A run on a thread of its own: the values where it stopped. Its thread is then deleted if
    the run ended (on_completion "delete", the default), or kept: asked to, stopped at a gate (a
    request waits for a reviewer), or still running when LANGGRAPH_RUN_WAIT_S ran out."""
    run = _start_stateless(request, body, stateless="wait")
    values = run_output(settled_thread(run.thread_id))
    if body.on_completion != "keep":
        do_end_stateless_run(run, user=request.user)
    return located(api.create_response(request, values, status=200), run)


@api.post("/runs/stream")
def stream_stateless_run(request: AuthedRequest, body: RunIn) -> StreamingHttpResponse:
    """runs.stream on a thread of its own, deleted as runs.wait's is once the stream saw the run
    end (a stream cut short, by its time or its client, leaves it kept)."""
    modes = stream_modes(body)
    run = _start_stateless(request, body, stateless="wait")
    user = request.user
    then = None if body.on_completion == "keep" else lambda: do_end_stateless_run(run, user=user)
    return located(
        event_stream(run_events(run.thread_id, str(run.id), modes=modes, since="", then=then)), run
    )


def _start_stateless(request: AuthedRequest, body: RunIn, *, stateless: Stateless) -> LangGraphRun:
    """Start a run on a new thread, with the rights of any start (an operator's or an admin's).
    `if_not_exists` is moot (the thread is always made), as on LangGraph's server. A background
    run's thread is deleted by the worker (nothing here waits for the run to end); a waited-for
    run's by the request that waits."""
    thread_id = str(uuid.uuid4())
    check_run_options(body, graph=langgraph_agent(body.assistant_id).compiled, stateless=True)
    if config_checkpoint(body.config, thread_id=thread_id) is not None:  # its ids, the new thread's
        raise InvalidInput({"config.configurable.checkpoint_id": NO_CHECKPOINT_YET})
    return do_run(
        user=request.user,
        thread_id=thread_id,
        assistant=body.assistant_id,
        graph_input=body.input,
        metadata=body.metadata,
        deletes_thread=stateless == "background" and body.on_completion != "keep",
    )
