"""Operators steer threads: pause, resume, cancel, edit state, fork, continue a conversation.

Every do_* locks the thread, writes, and notifies after commit. Moving the head past open
gates supersedes their approval requests (gates_superseded); gates that the new head still
needs are asked afresh (gates_opened), so no approval ever applies to a state it did not see.
"""

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pydantic
from django.db import transaction

from agents import gates as gate_protocol
from agents import llm
from agents.actions.start import InvalidInput, check_state
from agents.dispatch import after_commit
from agents.graph import Agent, Gate
from agents.loading import load_checkpoint
from agents.registry import UnknownAgent, registry
from agents.runtime import RESULT_PREFIX, load_state
from agents.tools import Decision
from checkpoints.backends import get_backend
from checkpoints.backends.base import (
    CheckpointData,
    CheckpointSummary,
    CorruptCheckpoint,
    NewCheckpoint,
    ThreadData,
    ThreadNotFound,
)
from checkpoints.digest import canonical_json
from checkpoints.models import CheckpointSource, ThreadStatus

ACTIVE = (ThreadStatus.RUNNING, ThreadStatus.WAITING, ThreadStatus.PAUSED)


class ThreadStateError(Exception):
    """The thread's status, or its agent's absence, does not allow this action (HTTP 409).
    Nothing was changed."""


class NothingChanged(Exception):
    """A state edit whose values are the head's already: nothing was written (HTTP 409)."""


NOTHING_CHANGED = (
    "Nothing changed. The values are the state at the head already: no checkpoint was written "
    "and open approvals stand as they were."
)


@dataclass(frozen=True)
class Written:
    """What a history-changing action wrote."""

    thread: ThreadData
    checkpoint: CheckpointData
    parent: CheckpointData
    """What the person changed: the head an edit replaced, the checkpoint a fork branched from."""
    previous_head: str
    superseded_reason: str


class HeadMoved(ThreadStateError):
    """The edit was made on a head the thread has moved past since (a step that committed after
    a pause, another operator's edit or fork): writing it would undo that. HTTP 409."""


def _locked(thread_id: str, *, allowed: tuple[ThreadStatus, ...], verb: str) -> ThreadData:
    try:
        thread = get_backend().lock_thread(thread_id=thread_id)
    except ThreadNotFound as exc:  # an admin deleted it after the page or API read it
        raise ThreadStateError(f"Cannot {verb} this thread: it was deleted.") from exc
    if thread.status not in allowed:
        names = ", ".join(s.value for s in allowed)
        raise ThreadStateError(f"Cannot {verb} a thread that is {thread.status}; it must be {names}.")
    return thread


def registered_agent(name: str, *, verb: str) -> Agent:
    """A thread's agent; an agent no longer registered (renamed or removed in a deploy) leaves
    its threads readable, but nothing can run them on."""
    try:
        return registry.get(name)
    except UnknownAgent as exc:
        raise ThreadStateError(
            f"Cannot {verb} this thread: its agent {name!r} is not registered in this deployment."
        ) from exc


def _set(thread: ThreadData, status: ThreadStatus, *, head: str | None) -> ThreadData:
    get_backend().set_status(thread_id=thread.id, status=status)
    after_commit(thread_id=thread.id, checkpoint_id=head, status=status, by_person=True)
    return get_backend().get_thread(thread_id=thread.id)


def do_pause(thread_id: str, *, actor: str) -> ThreadData:
    """Hold the thread between steps; a step in flight commits its work and then stops."""
    with transaction.atomic():
        thread = _locked(thread_id, allowed=(ThreadStatus.RUNNING, ThreadStatus.WAITING), verb="pause")
        return _set(thread, ThreadStatus.PAUSED, head=thread.head_id)


def do_resume(thread_id: str, *, actor: str) -> ThreadData:
    """Continue a paused thread from its head: wait for open gates, else run the next step."""
    with transaction.atomic():
        thread = _locked(thread_id, allowed=(ThreadStatus.PAUSED, ThreadStatus.FAILED), verb="resume")
        head = get_backend().get(thread_id=thread_id)
        return _set(thread, gate_protocol.status_at(head), head=head.id)


def do_cancel(thread_id: str, *, actor: str) -> ThreadData:
    """Stop the thread for good; its open approval requests are superseded."""
    with transaction.atomic():
        # A failed thread may be resumed, and one that failed at a gate keeps its requests open.
        thread = _locked(thread_id, allowed=(*ACTIVE, ThreadStatus.FAILED), verb="cancel")
        gate_protocol.supersede_gates(
            thread_id=thread_id,
            checkpoint_id=thread.head_id,
            reason=f"the thread was cancelled by {_name(actor)}",
        )
        return _set(thread, ThreadStatus.CANCELLED, head=thread.head_id)


def do_update_state(
    thread_id: str, *, values: dict[str, Any], actor: str, seen_head: str | None = None
) -> Written:
    """Write an `update` checkpoint with edited values, or raise NothingChanged if they are the
    head's. The thread must be paused, waiting or failed. `seen_head`: the head the values were
    edited from; HeadMoved if the thread is no longer there."""
    with transaction.atomic():
        allowed = (ThreadStatus.PAUSED, ThreadStatus.WAITING, ThreadStatus.FAILED)
        thread = _locked(thread_id, allowed=allowed, verb="edit the state of")
        if seen_head is not None and thread.head_id != seen_head:
            raise HeadMoved(
                "The state changed after it was read (a step or another operator moved the thread "
                "on): nothing was written. Read it again and edit that."
            )
        agent = registered_agent(thread.agent, verb="edit the state of")
        head = load_checkpoint(thread_id=thread_id, agent=agent.name)
        valid = check_state(agent, values)
        # An unchanged save would still supersede the open approvals and ask them again. As
        # JSON: to Python 1 == 1.0 == True, and changing one to another is an edit.
        if canonical_json(valid) == canonical_json(_as_stored(agent, head.values)):
            raise NothingChanged(NOTHING_CHANGED)
        if errors := agent.edit_errors(before=head.values, after=valid):  # the adapter's reason first
            raise InvalidInput(errors)
        if not agent.state_editable:
            raise InvalidInput({"values": f"the state of {agent.name!r} threads is not edited here"})
        valid = agent.edited_state(before=head.values, after=valid)
        # A waiting thread goes on once its (fresh) gates are decided; others stay paused.
        keep_paused = thread.status != ThreadStatus.WAITING
        reason = f"the state was edited by {_name(actor)}"
        return _write(
            thread,
            agent=agent,
            parent=head,
            values=valid,
            source=CheckpointSource.UPDATE,
            actor=actor,
            reason=reason,
            keep_paused=keep_paused,
        )


def _as_stored(agent: Agent, values: dict[str, Any]) -> dict[str, Any]:
    """The head's values as check_state returns an edit of them (defaults filled in), to compare."""
    try:
        return agent.state.model_validate(values).model_dump(mode="json")
    except pydantic.ValidationError:
        return values  # a head its schema no longer reads: any valid edit is a change


def do_fork(thread_id: str, *, checkpoint_id: str, values: dict[str, Any] | None, actor: str) -> Written:
    """Branch from any checkpoint (optionally with edited values) and move the head there."""
    with transaction.atomic():
        allowed = (*ACTIVE, ThreadStatus.DONE, ThreadStatus.FAILED, ThreadStatus.CANCELLED)
        thread = _locked(thread_id, allowed=allowed, verb="fork")
        agent = registered_agent(thread.agent, verb="fork")
        origin = load_checkpoint(thread_id=thread_id, checkpoint_id=checkpoint_id, agent=agent.name)
        valid = check_fork(agent, origin=origin.values, values=values)
        reason = f"{_name(actor)} forked the thread from step {origin.step}"
        return _write(
            thread,
            agent=agent,
            parent=origin,
            values=valid,
            source=CheckpointSource.FORK,
            actor=actor,
            reason=reason,
            keep_paused=False,
        )


def check_fork(agent: Agent, *, origin: dict[str, Any], values: dict[str, Any] | None) -> dict[str, Any]:
    """The state a fork from `origin` starts from: its own, or `values` (an edit of it) as the
    agent accepts them. Raise InvalidInput as a fork would: the fork dialog's preview calls this
    too, so it refuses what the confirm refuses, in the same words."""
    valid = check_state(agent, values if values is not None else origin)
    if values is None:
        return valid
    if errors := agent.edit_errors(before=origin, after=valid):
        raise InvalidInput(errors)
    return agent.edited_state(before=origin, after=valid)


def do_continue(thread_id: str, *, text: str, actor: str) -> Written:
    """Add a user message to a finished thread and run it on from its head."""
    with transaction.atomic():
        thread = _locked(thread_id, allowed=(ThreadStatus.DONE,), verb="continue")
        agent = registered_agent(thread.agent, verb="continue")
        head = load_checkpoint(thread_id=thread_id, agent=agent.name)
        values = agent.state.apply(load_state(agent, head).model_dump(mode="json"), agent.input_update(text))
        return _write(
            thread,
            agent=agent,
            parent=head,
            values=values,
            source=CheckpointSource.INPUT,
            actor=actor,
            reason="",
            keep_paused=False,
            next_node=agent.start,
        )


def _write(
    thread: ThreadData,
    *,
    agent: Agent,
    parent: CheckpointData,
    values: dict[str, Any],
    source: CheckpointSource,
    actor: str,
    reason: str,
    keep_paused: bool,
    next_node: str | None = None,
) -> Written:
    """Put a checkpoint under parent as the new head, re-open its gates, set the status."""
    backend = get_backend()
    # Only the old head's id: a fork from a good checkpoint must work when the head is corrupt.
    previous = thread.head_id or ""
    next_nodes = [next_node] if next_node else list(parent.next)
    gates = agent.pending_gates(agent.state.model_validate(values), next_nodes[0]) if next_nodes else []
    if problem := gate_protocol.unkeyable(gates):
        raise InvalidInput({"values": problem})
    if reason:
        gate_protocol.supersede_gates(thread_id=thread.id, checkpoint_id=previous, reason=reason)
    status = _status_for(gates=bool(gates), next_nodes=next_nodes, keep_paused=keep_paused)
    written = backend.put(
        thread_id=thread.id,
        parent_id=parent.id,
        expected_head=thread.head_id,
        status=status,
        checkpoint=NewCheckpoint(
            values=values,
            source=source,
            next=next_nodes,
            node="",
            created_by=actor,
            schema_version=agent.state.schema_version,
            metadata=gate_protocol.gate_metadata(gates),
        ),
    )
    gate_protocol.open_gates(thread_id=thread.id, agent=agent.name, checkpoint=written, gates=gates)
    after_commit(thread_id=thread.id, checkpoint_id=written.id, status=status, by_person=True)
    return Written(
        thread=backend.get_thread(thread_id=thread.id),
        checkpoint=written,
        parent=parent,
        previous_head=previous,
        superseded_reason=reason,
    )


def _status_for(*, gates: bool, next_nodes: list[str], keep_paused: bool) -> ThreadStatus:
    if keep_paused:
        return ThreadStatus.PAUSED
    if gates:
        return ThreadStatus.WAITING
    return ThreadStatus.RUNNING if next_nodes else ThreadStatus.DONE


def replay_warnings(thread_id: str, *, checkpoint_id: str) -> list[dict[str, Any]]:
    """Side-effecting (gated) actions that ran after checkpoint_id on its branch (the current
    one, or the branch the thread left it on): a fork from there (or, from the head, an edit) may
    run them again, each after a fresh approval."""
    try:
        thread = get_backend().get_thread(thread_id=thread_id)
        agent = registry.get(thread.agent)
    except UnknownAgent:
        return []  # nothing can be forked from it either (do_fork says why)
    origin = load_checkpoint(thread_id=thread_id, checkpoint_id=checkpoint_id, agent=agent.name)
    # One query reads every summary (no values): a thread's history may be long.
    by_id = {c.id: c for c in get_backend().history(thread_id=thread_id, limit=None)}
    end = _branch_end(by_id, origin=origin.id, head=thread.head_id or origin.id)
    try:
        head = (
            origin
            if origin.id == end
            else load_checkpoint(thread_id=thread_id, checkpoint_id=end, agent=agent.name)
        )
    except CorruptCheckpoint:
        return []  # what ran after cannot be read; a fork from a good checkpoint still works
    found = agent.side_effects_after(origin=origin.values, head=head.values)
    named = [_with_object_arguments(effect) for effect in found]
    recorded = _recorded_on_branch(agent, origin=origin, head=head, by_id=by_id)
    return named + _unnamed(recorded, named=named)


def _with_object_arguments(effect: dict[str, Any]) -> dict[str, Any]:
    """An effect found in the state with its arguments as an object, as a recorded one gives
    them (a gate's args): OpenAI's format keeps them as JSON text. Text that is not an object
    is kept under "__raw__", as the agent's gate holds such a call's arguments."""
    arguments = effect.get("arguments")
    if isinstance(arguments, dict):
        return effect
    parsed = llm.parse_arguments(arguments) if isinstance(arguments, str) else arguments
    return {**effect, "arguments": parsed if isinstance(parsed, dict) else {"__raw__": parsed}}


def _branch_end(by_id: dict[str, CheckpointSummary], *, origin: str, head: str) -> str:
    """The head if origin is on its branch; else the newest leaf below origin, the end of the
    branch the thread left it on: the head's branch never ran what a fork from origin replays."""
    if _branch(by_id, origin=origin, head=head):
        return head
    children: dict[str, list[CheckpointSummary]] = {}
    for c in by_id.values():
        children.setdefault(c.parent_id or "", []).append(c)
    leaves, below = [], [by_id[origin]] if origin in by_id else []
    while below:
        checkpoint = below.pop()
        below += children.get(checkpoint.id, [])
        leaves += [] if checkpoint.id in children else [checkpoint]
    return max(leaves, key=lambda c: (c.created_at, c.step)).id if leaves else origin


def _unnamed(recorded: list[dict[str, Any]], *, named: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recorded results the agent's own list does not name. Each named call (by its gate
    key) accounts for one recorded result: a call a fork copied may have run on both branches."""
    unclaimed = Counter(effect.get("key") for effect in named)
    left = []
    for effect in recorded:
        if unclaimed[effect["key"]]:
            unclaimed[effect["key"]] -= 1
        else:
            left.append(effect)
    return left


def _recorded_on_branch(
    agent: Agent, *, origin: CheckpointData, head: CheckpointData, by_id: dict[str, CheckpointSummary]
) -> list[dict[str, Any]]:
    """Gated actions whose results runtime.run_once recorded at a gate checkpoint from origin to
    head. A tool's result commits with its side effect, before its step's checkpoint: this finds
    an effect whether its step landed, or a cancel, edit or fork (or a dead worker) left it in no
    state of the branch, and for agents whose values side_effects_after cannot read."""
    found: list[dict[str, Any]] = []
    for checkpoint in _branch(by_id, origin=origin.id, head=head.id):
        if checkpoint.metadata.get(gate_protocol.GATES_KEY):
            found += _recorded_effects(agent, checkpoint=checkpoint, loaded=(origin, head))
    return found


def _branch(by_id: dict[str, CheckpointSummary], *, origin: str, head: str) -> list[CheckpointSummary]:
    """Each checkpoint from head back to origin; [] if origin is not on head's branch."""
    branch: list[CheckpointSummary] = []
    checkpoint = by_id.get(head)
    while checkpoint is not None:
        branch.append(checkpoint)
        if checkpoint.id == origin:
            return branch
        checkpoint = by_id.get(checkpoint.parent_id or "")
    return []


def _recorded_effects(
    agent: Agent, *, checkpoint: CheckpointSummary, loaded: tuple[CheckpointData, ...]
) -> list[dict[str, Any]]:
    """The gates at checkpoint whose tool ran (runtime.run_once recorded its result under the
    gate's key), with the arguments it ran with. Its values are read only if one did."""
    writes = get_backend().get_writes(thread_id=checkpoint.thread_id, checkpoint_id=checkpoint.id)
    ran = {k for k in checkpoint.metadata[gate_protocol.GATES_KEY] if RESULT_PREFIX + k in writes}
    if not ran:
        return []
    known = next((c for c in loaded if c.id == checkpoint.id), None)
    stored = known or load_checkpoint(
        thread_id=checkpoint.thread_id, checkpoint_id=checkpoint.id, agent=agent.name
    )
    gates = agent.pending_gates(load_state(agent, stored), checkpoint.next[0])
    return [
        {
            "key": g.key,
            "tool": g.action,
            "arguments": _ran_with(g, writes=writes),
            "result": writes[RESULT_PREFIX + g.key][1],
        }
        for g in gates
        if g.key in ran
    ]


def _ran_with(gate: Gate, *, writes: dict[str, tuple[str, Any]]) -> dict[str, Any]:
    recorded = writes.get(gate_protocol.DECISION_PREFIX + gate.key)
    decision = gate_protocol.HumanDecision.from_write(recorded[1]) if recorded else None
    return decision.args if decision and decision.kind == Decision.EDIT and decision.args else gate.args


def _name(actor: str) -> str:
    return actor.removeprefix("user:")
