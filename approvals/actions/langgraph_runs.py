"""Runs of the LangGraph server API (`/langgraph`): start, continue or resume a LangGraph agent's
thread. A resume is a decision like any other: each answer decides its approval request as the
token's user (permission, 409 if someone decided first, the ledger, the undo window). Each run
is stored (LangGraphRun), so a client reads back the runs it started and no other; one still
pending or running may be cancelled, one that ended deleted. A stateless run's thread (one the
server made for it) is deleted once its run has ended, unless it stopped at a gate for a reviewer
(do_end_stateless_run): by the request that waited for it, or, for a background run, by
on_thread_changed once the run's end commits."""

import logging
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from agents.actions import InvalidInput, Written, check_start_thread, do_start_thread
from agents.adapters.langgraph_agent import LangGraphAgent, split_gate_key
from agents.loading import load_checkpoint
from agents.registry import UnknownAgent, registry
from approvals.access import Access
from approvals.actions.audit import appended_last
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.errors import Conflict
from approvals.actions.threads import delete_locked_thread, do_continue_thread, do_control, do_edit_state
from approvals.models import DECIDED, ApprovalRequest, ApprovalStatus, LangGraphRun, RunOutcome
from checkpoints import selectors as checkpoint_selectors
from checkpoints.backends import get_backend
from checkpoints.backends.base import CheckpointData, ThreadData, ThreadNotFound
from checkpoints.models import Thread, ThreadStatus

logger = logging.getLogger(__name__)


def langgraph_agents() -> list[LangGraphAgent]:
    """The registered LangGraph agents: the server API's assistants."""
    return [a for a in registry.all() if isinstance(a, LangGraphAgent)]


def langgraph_agent(name: str) -> LangGraphAgent:
    """The registered LangGraph agent `name` (an assistant), or UnknownAgent."""
    agent = registry.get(name)
    if not isinstance(agent, LangGraphAgent):
        raise UnknownAgent(name, [a.name for a in langgraph_agents()])
    return agent


def deciding_requests() -> QuerySet[ApprovalRequest]:
    """Decisions waiting out their undo window (DECISION_UNDO_S)."""
    return ApprovalRequest.objects.filter(status__in=DECIDED, undo_until__isnull=False)


def deciding(thread_id: str) -> bool:
    """Whether a decision on the thread waits out its undo window (DECISION_UNDO_S): the thread
    still waits at its gate, but a run resumed by it has not begun, let alone ended."""
    return deciding_requests().filter(thread_id=thread_id).exists()


INPUT_SHAPE = 'send {"messages": [{"role": "user", "content": "…"}]}: one user message, text content'


def human_text(graph_input: Any) -> str:
    """The text of a run's input: one user message ({"messages": [...]}). Anything else (several
    messages, a system or assistant one, other state keys) is refused, not dropped: the agent
    takes a person's message, and would run without what the client meant it to have."""
    if not isinstance(graph_input, dict) or set(graph_input) != {"messages"}:
        raise InvalidInput({"input": INPUT_SHAPE})
    messages = graph_input["messages"]
    if isinstance(messages, (str, dict)):  # LangGraph's add_messages takes one message alone too
        messages = [messages]
    if not isinstance(messages, list) or len(messages) != 1:
        raise InvalidInput({"input": INPUT_SHAPE})
    [message] = messages
    if isinstance(message, dict):
        role = message.get("role", message.get("type"))
        if role not in ("user", "human"):
            raise InvalidInput({"input": f"a message with role {role!r}: {INPUT_SHAPE}"})
        content = message.get("content")
    else:
        content = message  # a bare string is a human message to LangGraph
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput({"input": f"the message must have text content: {INPUT_SHAPE}"})
    return content


def check_at_head(head: CheckpointData | None, *, checkpoint_id: str | None) -> None:
    """A run or an update goes on from the thread's latest state: one asked for at an earlier
    checkpoint (a client's branch) is refused, not run from the latest instead."""
    at_head = head is not None and checkpoint_id in (head.id, head.values.get("langgraph_checkpoint"))
    if checkpoint_id is not None and not at_head:
        raise InvalidInput(
            {"checkpoint": "only the thread's latest state goes on (fork from an earlier one in the console)"}
        )


def do_run(
    *,
    user: AbstractBaseUser,
    thread_id: str,
    assistant: str,
    graph_input: Any = None,
    resume: Any = None,
    checkpoint_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    deletes_thread: bool = False,
) -> LangGraphRun:
    """Start the thread (it does not exist yet), add a message to it, or resume its interrupts;
    return the run, stored with what it did (none is stored for a run refused). `deletes_thread`:
    a background stateless run's, whose thread on_thread_changed deletes when the run ends."""
    agent = langgraph_agent(assistant)
    access = Access.of(user)
    # A thread the user may not see is answered as a missing one (not found, or "only operators
    # start threads"): its existence is not told. Operators see every thread.
    owner = checkpoint_selectors.thread_agent(thread_id) if access.can_see_thread(thread_id) else None
    if owner is not None and owner != agent.name:
        raise InvalidInput({"assistant_id": f"the thread belongs to {owner!r}"})
    if checkpoint_id is not None:
        check_at_head(
            load_checkpoint(thread_id=thread_id, agent=agent.name) if owner else None,
            checkpoint_id=checkpoint_id,
        )
    run = LangGraphRun(
        thread_id=thread_id,
        assistant=agent.name,
        metadata=metadata or {},
        started_by=user,  # type: ignore[misc]
        deletes_thread=deletes_thread,
    )
    with transaction.atomic(), appended_last():
        if resume is not None:
            if owner is None:
                raise Thread.DoesNotExist(thread_id)
            do_resume(user=user, thread_id=thread_id, resume=resume)
            return _recorded(run, previous=RunOutcome.INTERRUPTED)  # a resume answers its interrupt
        text = human_text(graph_input)
        if owner is not None:
            do_continue_thread(thread_id, user=user, text=text)  # type: ignore[arg-type]
            return _recorded(run, previous=RunOutcome.SUCCESS)  # only a done thread takes a message
        access.require_operator("start")
        definition = check_start_thread(agent=agent.name, text=text, thread_id=thread_id)
        do_start_thread(agent=definition, text=text, thread_id=thread_id, actor=f"user:{user.get_username()}")
        return _recorded(run, previous=None)


def _recorded(run: LangGraphRun, *, previous: RunOutcome | None) -> LangGraphRun:
    """Store the run, and how the thread's run before it ended (`previous`, known from what the
    new run was allowed to do). Call inside the transaction of what the run did."""
    if previous is not None:
        LangGraphRun.objects.filter(thread_id=run.thread_id, outcome="").update(
            outcome=previous, updated_at=timezone.now()
        )
    run.save(force_insert=True)
    return run


def do_resume(*, user: AbstractBaseUser, thread_id: str, resume: Any) -> None:
    """Decide the thread's pending requests from a `Command(resume=...)` value: one interrupt's
    answer (LangChain's {"decisions": [...]} or Agent Inbox's list), or {interrupt_id: answer}."""
    pending = ApprovalRequest.objects.filter(thread_id=thread_id, status=ApprovalStatus.PENDING)
    by_interrupt: dict[str, list[ApprovalRequest]] = {}
    for request_ in sorted(pending, key=lambda r: split_gate_key(r.key)[1]):  # in the order asked
        by_interrupt.setdefault(split_gate_key(request_.key)[0], []).append(request_)
    if not by_interrupt:
        last = ApprovalRequest.objects.filter(thread_id=thread_id).select_related("decided_by").last()
        if last is not None and last.decided_by is not None:  # a reviewer answered first
            raise Conflict(f"Already {last.status} by {last.decided_by.get_username()}.")
        raise InvalidInput({"command": "the thread has no pending interrupt to resume"})
    # An empty dict decides nothing: it falls through and is refused below.
    if isinstance(resume, dict) and resume and set(resume) <= set(by_interrupt) and "decisions" not in resume:
        answers = resume
    elif len(by_interrupt) == 1:
        answers = {next(iter(by_interrupt)): resume}
    else:
        raise InvalidInput(
            {"command": f"several interrupts are pending: resume by id ({', '.join(by_interrupt)})"}
        )
    decided = []
    for interrupt_id, answer in answers.items():
        requests = by_interrupt[interrupt_id]
        items = answer.get("decisions") if isinstance(answer, dict) else answer
        if not isinstance(items, list) or len(items) != len(requests):
            raise InvalidInput(
                {"command": f"interrupt {interrupt_id} asks {len(requests)} decisions, in order"}
            )
        decided += [
            (r, _decision(item, allowed=r.allowed_decisions, index=index))
            for index, (r, item) in enumerate(zip(requests, items, strict=True))
        ]
    valid = [(r, check_decision(r, user=user, **d)) for r, d in decided]  # all checked before any is stored
    # All stored or none: a request decided by someone else meanwhile makes the whole resume a 409.
    with transaction.atomic(), appended_last():
        for request_, checked in valid:
            do_decide(request_, reviewer=user, valid=checked)


def _decision(item: Any, *, allowed: list[str], index: int) -> dict[str, Any]:
    """One answer (LangChain's or Agent Inbox's) as check_decision's arguments. Agent Inbox sends a
    rejection as a response: where the gate takes no response, it is a reject with that reason."""
    kind = item.get("type") if isinstance(item, dict) else None
    if kind in ("approve", "accept"):
        return {"decision": "approve"}
    if kind == "edit":
        edited = item.get("edited_action") or item.get("args") or {}
        if not isinstance(edited, dict):
            raise InvalidInput({"command": f"decision {index}: an edit's action must be an object"})
        return {"decision": "edit", "args": edited.get("args")}
    if kind == "reject":
        return {"decision": "reject", "message": _text(item.get("message"), index=index)}
    if kind == "response":
        decision = "respond" if "respond" in allowed else "reject"
        return {"decision": decision, "message": _text(item.get("args"), index=index)}
    if kind == "ignore":
        return {"decision": "reject", "message": "Ignored by a reviewer"}
    raise InvalidInput({"command": f"decision {index}: unknown decision type {kind!r}"})


def _text(value: Any, *, index: int) -> str:
    """A reject's or a response's message: text, or nothing."""
    if value is not None and not isinstance(value, str):
        raise InvalidInput({"command": f"decision {index}: a message must be text"})
    return value or ""


END = "__end__"


def do_update_state(
    *, user: AbstractBaseUser, thread_id: str, values: Any, as_node: str | None, checkpoint_id: str | None
) -> Written | None:
    """A LangGraph client's update_state, as an operator's edit of the conversation (the same
    permission, rules, ledger entry and 409s): its `messages` reduced into the thread's as
    LangGraph's add_messages does. The node stopped at an interrupt runs again on the edit.

    No values as the graph's end (what Agent Inbox's "mark as resolved" sends) ends the thread:
    an operator's cancel, its open requests superseded. Returns None then."""
    if as_node == END and values is None:
        do_control(thread_id, user=user, verb="cancel")  # type: ignore[arg-type]
        return None
    if as_node is not None:
        raise InvalidInput(
            {
                "as_node": "not served: an update edits the conversation, and the node stopped "
                "at an interrupt runs again on it"
            }
        )
    if not isinstance(values, dict) or set(values) != {"messages"}:
        raise InvalidInput({"values": "only the conversation can be updated: send {'messages': [...]}"})
    agent = langgraph_agent(checkpoint_selectors.thread(thread_id).agent)
    head = load_checkpoint(thread_id=thread_id, agent=agent.name)
    check_at_head(head, checkpoint_id=checkpoint_id)
    try:
        messages = agent.reduced_messages(head.values.get("messages", []), values["messages"])
    except Exception as exc:  # a client's input, in any shape: LangChain raises what it meets
        raise InvalidInput({"values.messages": f"not messages LangGraph can add: {exc}"}) from exc
    with transaction.atomic():
        # The edit is the head's values with the messages reduced: if a step moved the head since
        # it was read, they would carry its stale interrupts and checkpoint; the client retries.
        if get_backend().lock_thread(thread_id=thread_id).head_id != head.id:
            raise Conflict("The thread moved on while the update was read; get its state and try again.")
        return do_edit_state(thread_id, user=user, values={**head.values, "messages": messages})  # type: ignore[arg-type]


def _in_progress(run: LangGraphRun, *, thread: ThreadData) -> bool:
    """Whether the run is pending (its resume in the undo window) or running: the thread's latest
    run, its thread stepping or with a decision about to take effect."""
    if run.outcome:
        return False
    if thread.status == ThreadStatus.WAITING:
        return deciding(run.thread_id)
    return thread.status in (ThreadStatus.RUNNING, ThreadStatus.PAUSED)


def do_cancel_run(run: LangGraphRun, *, user: AbstractBaseUser) -> None:
    """Cancel a pending or running run (LangGraph's action "interrupt"): an operator's cancel of
    its thread, which ends it (a step in flight is discarded, a decision in its undo window
    withdrawn, its checkpoints kept); the run is stored as interrupted. A run that has ended
    (stopped at a gate, finished, failed) is a Conflict, as on LangGraph's server."""
    Access.of(user).require_operator("cancel")
    with transaction.atomic():
        thread = get_backend().lock_thread(thread_id=run.thread_id)  # no step ends under the check
        if not _in_progress(run, thread=thread):
            raise Conflict(
                "Only a pending or running run can be cancelled: this one has ended (to end a "
                "thread waiting at its gate, update its state as '__end__'); nothing was done."
            )
        do_control(run.thread_id, user=user, verb="cancel")  # type: ignore[arg-type]
        LangGraphRun.objects.filter(pk=run.pk).update(
            outcome=RunOutcome.INTERRUPTED, updated_at=timezone.now()
        )


def do_delete_run(run: LangGraphRun, *, user: AbstractBaseUser) -> None:
    """Delete the record of a run that has ended; what it did (the thread, its checkpoints, the
    decisions and the ledger) stays. A pending or running one is a Conflict: cancel it first."""
    Access.of(user).require_operator("delete runs of")
    with transaction.atomic():
        thread = get_backend().lock_thread(thread_id=run.thread_id)
        if _in_progress(run, thread=thread):
            raise Conflict("The run is pending or running: cancel it first; nothing was done.")
        LangGraphRun.objects.filter(pk=run.pk).delete()


ENDED = (ThreadStatus.DONE, ThreadStatus.FAILED, ThreadStatus.CANCELLED)
"""Where a stateless run's thread is deleted (on_completion "delete"): its run has ended."""


def do_end_stateless_run(run: LangGraphRun, *, user: AbstractBaseUser) -> bool:
    """Delete the thread a stateless run made (on_completion "delete", as LangGraph's server
    deletes a temporary thread) if its run has ended: done, failed or cancelled. A thread that
    stopped at a gate for a reviewer is kept, waiting there or decided since: the request is the
    reviewer's (LangGraph would drop the interrupt with the thread), and the thread an ordinary
    one from then on. One still running is kept too: a step in flight would write to a thread
    gone. The deletion is audited as the thread's deletion, by the run's user; returns whether it
    was made (not when made before: an end seen twice deletes and records it once)."""
    with transaction.atomic(), appended_last():
        try:
            thread = get_backend().lock_thread(thread_id=run.thread_id)  # no step ends under the check
        except ThreadNotFound:
            return False  # deleted first: by an admin, or by this run's end seen before
        if thread.status not in ENDED or deciding(run.thread_id) or _reviewed(run.thread_id):
            return False
        delete_locked_thread(thread, user=user, why={"on_completion": "delete", "stateless_run": str(run.id)})
    return True


def _reviewed(thread_id: str) -> bool:
    """Whether the thread stopped at a gate for a reviewer: a request of it not decided by a
    policy (pending, a person's decision, expired or superseded)."""
    by_policy = Q(status__in=DECIDED, decided_by__isnull=True) & ~Q(policy_name="")
    return ApprovalRequest.objects.filter(thread_id=thread_id).exclude(by_policy).exists()


def on_thread_changed(sender: Any, *, thread_id: str, status: str, **kwargs: Any) -> None:
    """agents.signals.thread_changed, after the commit of a thread's change (the worker's step
    that ended it, or the cancel that did): a background stateless run's thread is deleted once
    its run ended. A step redelivered after its commit sends this again (resent): the deletion
    is made and recorded once. Never raises: the other receivers and the next step go on."""
    if status not in ENDED:
        return
    try:
        do_end_background_run(thread_id=thread_id)
    except Exception:  # logged, and the thread stays (as a kept one would): the run did end
        logger.exception("could not delete the thread %s of a background stateless run", thread_id)


def do_end_background_run(*, thread_id: str) -> bool:
    """Delete the thread of a background stateless run (runs.create, on_completion "delete") by
    do_end_stateless_run's rule, if its run is still the thread's latest; returns whether it was
    deleted. A run whose user was deleted meanwhile keeps its thread: nobody is left to record as
    the deletion's."""
    run = (
        LangGraphRun.objects.filter(thread_id=thread_id, deletes_thread=True, outcome="")
        .select_related("started_by")
        .first()
    )
    if run is None or run.started_by is None:
        return False
    return do_end_stateless_run(run, user=run.started_by)
