"""A Gatehouse thread as LangGraph's server shows it: its statuses, its runs, and a checkpoint
as a state (values from LangGraph's own checkpoint there, its interrupts as tasks)."""

from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet

from agents.loading import load_checkpoint
from approvals.actions.langgraph_runs import deciding, deciding_requests, langgraph_agent
from approvals.models import LangGraphRun
from checkpoints import selectors as checkpoint_selectors
from checkpoints.backends.base import CheckpointData
from checkpoints.models import Thread, ThreadStatus

SETTLED = {ThreadStatus.WAITING, ThreadStatus.DONE, ThreadStatus.FAILED, ThreadStatus.CANCELLED}
"""Where a run stops: at a gate, or at the end."""
STATUS = {  # Gatehouse's thread status as LangGraph's
    ThreadStatus.RUNNING: "busy",
    ThreadStatus.PAUSED: "busy",
    ThreadStatus.WAITING: "interrupted",
    ThreadStatus.DONE: "idle",
    ThreadStatus.CANCELLED: "idle",
    ThreadStatus.FAILED: "error",
}
RUN_STATUS = {"busy": "running", "interrupted": "interrupted", "idle": "success", "error": "error"}
RUN_STATUSES = ("pending", "running", "error", "success", "timeout", "interrupted")
"""LangGraph's run statuses (a runs.list filter)."""


def shown_as(rows: QuerySet[Thread], *, status: str) -> QuerySet[Thread]:
    """The threads among `rows` shown with LangGraph's `status`, in the same query: a waiting
    thread with a decision in its undo window is shown busy, not interrupted (see deciding)."""
    answering = deciding_requests().filter(thread_id=OuterRef("pk"))
    answered = Q(status=ThreadStatus.WAITING) & Q(Exists(answering))
    statuses = Q(status__in=[s for s, shown in STATUS.items() if shown == status])
    if status == "interrupted":
        return rows.filter(statuses & ~answered)
    if status == "busy":
        return rows.filter(statuses | answered)
    return rows.filter(statuses)


def settled(thread_id: str) -> tuple[Thread, bool]:
    """The thread, and whether a run on it has stopped: at a gate nobody has answered yet, or at
    the end. A gate answered inside its undo window is not a stop: the resumed run is to come."""
    # Asked before the thread is read: a decision takes effect and sets the thread running in
    # one transaction, so a thread read after "none is deciding" is not the waiting one before.
    answered = deciding(thread_id)
    thread = checkpoint_selectors.thread(thread_id)
    if thread.status == ThreadStatus.WAITING:
        return thread, not answered
    return thread, thread.status in SETTLED


def live_run_status(thread_id: str) -> tuple[Thread, str]:
    """The thread, and the status of its latest run: the thread's, as LangGraph names a run's."""
    thread, stopped = settled(thread_id)
    # A decision in its undo window: the resumed run has not begun (LangGraph's "pending").
    if not stopped and thread.status == ThreadStatus.WAITING:
        return thread, "pending"
    return thread, RUN_STATUS[STATUS[ThreadStatus(thread.status)]]


def shown_run(run: LangGraphRun, *, thread: Thread | None, live: str) -> dict[str, Any]:
    """A stored run as LangGraph's server shows one: the thread's latest with its status `live`
    (and the thread's last change), an earlier one as it ended. `thread` None: gone already
    (a background stateless run's, deleted as the run ended before its start was answered)."""
    latest = not run.outcome
    changed = max(run.updated_at, thread.updated_at) if latest and thread is not None else run.updated_at
    return {
        "run_id": str(run.id),
        "thread_id": run.thread_id,
        "assistant_id": run.assistant,
        "status": live if latest else run.outcome,
        "metadata": run.metadata,
        "multitask_strategy": "reject",  # the only one served: a run on a busy thread is a 409
        "created_at": run.created_at.isoformat(),
        "updated_at": changed.isoformat(),
        "kwargs": {},
    }


def shown_interrupts(interrupts: list[Any]) -> list[Any]:
    """The thread's interrupts as clients read them: each action request's `args` also as
    `arguments`, the key Agent Inbox reads (it showed reviewers no arguments otherwise)."""
    return [_with_arguments(i) for i in interrupts]


def _with_arguments(interrupt: Any) -> Any:
    value = interrupt.get("value") if isinstance(interrupt, dict) else None
    if not isinstance(value, dict) or not isinstance(requests := value.get("action_requests"), list):
        return interrupt
    both = [
        {**r, "arguments": r["args"]} if isinstance(r, dict) and "args" in r and "arguments" not in r else r
        for r in requests
    ]
    return {**interrupt, "value": {**value, "action_requests": both}}


def run_output(thread: Thread) -> dict[str, Any]:
    """What runs.wait and runs.join answer for the thread's latest run, as LangGraph's server:
    the values where it stopped, with `__interrupt__` (what it waits on) at an unanswered gate,
    or only `__error__` if it failed (LangGraph's client raises it: a failure is not values)."""
    if thread.status == ThreadStatus.FAILED:
        return {"__error__": {"error": "RunError", "message": thread.error or "The run failed."}}
    state = thread_state(thread)
    if thread.status == ThreadStatus.WAITING and state["interrupts"] and not deciding(thread.pk):
        return {**state["values"], "__interrupt__": state["interrupts"]}
    return dict(state["values"])


def thread_state(thread: Thread) -> dict[str, Any]:
    """The thread's state as LangGraph's server shows it, read from its head checkpoint."""
    return state_at(load_checkpoint(thread_id=thread.pk, agent=thread.agent), agent=thread.agent)


def state_at(checkpoint: CheckpointData, *, agent: str) -> dict[str, Any]:
    """A checkpoint of a LangGraph agent's thread as LangGraph's server shows a state."""
    graph = langgraph_agent(agent)
    interrupts = shown_interrupts(checkpoint.values.get("interrupts") or [])
    config = graph.checkpoint_config(checkpoint.values, thread_id=checkpoint.thread_id)
    values: dict[str, Any] = {"messages": checkpoint.values.get("messages", [])}
    if config["configurable"]["checkpoint_id"]:
        snapshot = graph.compiled.get_state(config)  # type: ignore[arg-type]
        values = {k: jsonable(v) for k, v in (snapshot.values or {}).items()}
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


def jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value
