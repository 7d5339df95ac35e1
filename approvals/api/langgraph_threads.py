"""The threads of the LangGraph server API: create (an id; the thread starts with its first run,
so metadata other than graph_id is refused), get, search (status, metadata, ids,
sort_by/sort_order), get_state, update_state (an operator's edit of the conversation, or Agent
Inbox's "mark as resolved") and history. Each is a Gatehouse thread of a LangGraph agent that
the token's user may see; any other is a 404, as a missing one is."""

import re
import uuid
from typing import Annotated, Any

from ninja import Schema
from pydantic import Field

from agents.actions import InvalidInput
from agents.loading import load_checkpoint
from approvals.access import Access
from approvals.actions.langgraph_runs import deciding, do_update_state, langgraph_agent, langgraph_agents
from approvals.api.langgraph_api import MAX_SEARCH_LIMIT, SearchIn, Strict, api, error
from approvals.api.langgraph_options import named_checkpoint
from approvals.api.langgraph_state import STATUS, shown_as, state_at, thread_state
from approvals.http import AuthedRequest
from checkpoints import selectors as checkpoint_selectors
from checkpoints.backends import get_backend
from checkpoints.backends.base import CorruptCheckpoint
from checkpoints.ids import THREAD_ID_RULE, is_valid_thread_id
from checkpoints.models import Thread, ThreadStatus

METADATA_KEY = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")  # no "__": not a lookup
THREAD_STATUSES = ("idle", "busy", "interrupted", "error")
SORTED_BY = {"created_at": "created_at", "updated_at": "updated_at", "thread_id": "id"}


class UpdateStateIn(Schema):
    values: Any = None
    as_node: str | None = None
    checkpoint: dict[str, Any] | None = None
    checkpoint_id: str | None = None


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


class HistoryIn(Strict):
    # Bounded as a search is (each state loads a checkpoint), refused beyond: a longer history
    # cut short without a word would read as the whole of it. Page with `before`.
    limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT)] = 10
    before: str | dict[str, Any] | None = None


def visible(request: AuthedRequest, thread_id: str) -> Thread:
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
            return error(request, 409, f"Thread {body.thread_id} already exists.")
        return _thread(visible(request, body.thread_id))
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
    return _thread(visible(request, thread_id))


@api.get("/threads/{thread_id}/state")
def get_state(request: AuthedRequest, thread_id: str) -> Any:
    return thread_state(visible(request, thread_id))


@api.post("/threads/{thread_id}/state")
def update_state(request: AuthedRequest, thread_id: str, body: UpdateStateIn) -> Any:
    """An edit of the thread's conversation (an operator's), reduced as LangGraph's add_messages;
    no values as the graph's end ends the thread (Agent Inbox's "mark as resolved")."""
    thread = visible(request, thread_id)
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
    thread = visible(request, thread_id)
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
