"""Export a thread (or one branch) as a JSON document, and import one into this installation:
a production trace becomes a reproducible test case."""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.utils import timezone

from agents import signals
from agents.actions import InvalidInput, check_state, do_record_decision
from agents.graph import Agent
from agents.registry import UnknownAgent, registry
from agents.runtime import GATES_KEY, decisions_at
from approvals.actions.audit import do_audit
from approvals.actions.decisions import STATUS_FOR
from approvals.models import ApprovalRequest
from checkpoints.backends import get_backend
from checkpoints.backends.base import CheckpointData, NewCheckpoint, ThreadData
from checkpoints.models import Thread, ThreadStatus

FORMAT = "gatehouse.thread/1"


def export_thread(thread: Thread, *, branch: str | None = None) -> dict[str, Any]:
    """Every checkpoint (or only branch's ancestors), the decisions taken, and the schema version."""
    backend = get_backend()
    checkpoints = list(reversed(backend.list(thread_id=thread.id)))  # oldest first: parents before children
    if branch:
        keep = _ancestors({c.id: c for c in checkpoints}, branch)
        checkpoints = [c for c in checkpoints if c.id in keep]
    ids = {c.id for c in checkpoints}
    decisions = (
        ApprovalRequest.objects.filter(thread=thread).select_related("decided_by").order_by("created_at")
    )
    return {
        "format": FORMAT,
        "exported_at": timezone.now().isoformat(),
        "thread": {
            "id": thread.id,
            "agent": thread.agent,
            "status": thread.status,
            "head": branch or (str(thread.head_id) if thread.head_id else None),
        },
        "checkpoints": [_checkpoint(c) for c in checkpoints],
        "decisions": [_decision(r) for r in decisions if str(r.checkpoint_id) in ids],
    }


def _ancestors(by_id: dict[str, CheckpointData], leaf: str) -> set[str]:
    found: set[str] = set()
    node = by_id.get(leaf)
    while node is not None and node.id not in found:
        found.add(node.id)
        node = by_id.get(node.parent_id or "")
    return found


def _checkpoint(c: CheckpointData) -> dict[str, Any]:
    return {
        "id": c.id,
        "parent_id": c.parent_id,
        "step": c.step,
        "source": c.source,
        "node": c.node,
        "next": c.next,
        "created_by": c.created_by,
        "created_at": c.created_at.isoformat(),
        "schema_version": c.schema_version,
        "metadata": c.metadata,
        "digest": c.digest,
        "values": c.values,
    }


def _decision(r: ApprovalRequest) -> dict[str, Any]:
    return {
        "checkpoint_id": str(r.checkpoint_id),
        "key": r.key,
        "action": r.action,
        "args": r.args,
        "status": r.status,
        "decided_by": r.decided_by.get_username() if r.decided_by else None,
        "decision_args": r.decision_args,
        "message": r.decision_message,
    }


class InvalidExport(ValueError):
    """The document cannot be imported; nothing was written."""


def check_import(document: Any) -> dict[str, Any]:
    """Validate an export's shape and every state against its agent; return the document."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise InvalidExport(f"not a Gatehouse thread export (expected format {FORMAT!r})")
    try:
        agent = registry.get(document["thread"]["agent"])
        checkpoints = document["checkpoints"]
        ids = {c["id"] for c in checkpoints}
        roots = [c for c in checkpoints if c["parent_id"] not in ids]
        for c in checkpoints:
            check_state(agent, agent.state.upgrade(c["values"], from_version=c["schema_version"]))
    except (KeyError, TypeError, UnknownAgent, InvalidInput) as exc:
        raise InvalidExport(f"invalid export: {exc}") from exc
    if len(roots) != 1 or document["thread"]["head"] not in ids:
        raise InvalidExport(
            "invalid export: it needs exactly one root checkpoint and its head among the checkpoints"
        )
    return document


def do_import_thread(
    document: dict[str, Any], *, thread_id: str | None, user: AbstractBaseUser | AnonymousUser | None
) -> ThreadData:
    """Recreate an exported thread (checkpoints as a tree, decisions as writes). An active thread
    arrives paused, or waiting when its head has open gates (asked afresh here). Audited as
    `user` (None: the command line)."""
    agent = registry.get(document["thread"]["agent"])
    ordered = _parents_first(document["checkpoints"], head=document["thread"]["head"])
    backend = get_backend()
    new_id = thread_id or document["thread"]["id"]
    with transaction.atomic():
        _, first = backend.create_thread(
            thread_id=new_id,
            agent=agent.name,
            status=ThreadStatus.PAUSED,
            first=_new(ordered[0], agent),
            metadata={"imported_from": document["thread"]["id"]},
        )
        mapped = {ordered[0]["id"]: first.id}
        for c in ordered[1:]:
            written = backend.put(
                thread_id=new_id,
                parent_id=mapped[c["parent_id"]],
                expected_head=mapped[_last(mapped)],
                checkpoint=_new(c, agent),
                status=ThreadStatus.PAUSED,
            )
            mapped[c["id"]] = written.id
        _import_decisions(document, thread_id=new_id, mapped=mapped)
        _settle(new_id, agent=agent, exported_status=document["thread"]["status"])
        thread = backend.get_thread(thread_id=new_id)
        do_audit(
            actor=user,
            action="thread.import",
            thread_id=new_id,
            checkpoint_id=thread.head_id or "",
            data={"imported_from": document["thread"]["id"], "checkpoints": len(ordered)},
        )
    return thread


def _parents_first(checkpoints: list[dict[str, Any]], *, head: str) -> list[dict[str, Any]]:
    # The head is a leaf: putting it last leaves the imported head where it was.
    by_step = sorted(checkpoints, key=lambda c: (c["step"], c["created_at"]))
    return [c for c in by_step if c["id"] != head] + [c for c in by_step if c["id"] == head]


def _last(mapped: dict[str, str]) -> str:
    return next(reversed(mapped))


def _new(c: dict[str, Any], agent: Agent) -> NewCheckpoint:
    return NewCheckpoint(
        values=agent.state.upgrade(c["values"], from_version=c["schema_version"]),
        source=c["source"],
        next=list(c["next"]),
        node=c["node"],
        created_by=c["created_by"],
        schema_version=agent.state.schema_version,
        metadata=c.get("metadata") or {},
    )


def _import_decisions(document: dict[str, Any], *, thread_id: str, mapped: dict[str, str]) -> None:
    for d in document.get("decisions", []):
        if d["status"] in STATUS_FOR.values() and d["checkpoint_id"] in mapped:
            decision = {v: k for k, v in STATUS_FOR.items()}[d["status"]]
            do_record_decision(
                thread_id=thread_id,
                checkpoint_id=mapped[d["checkpoint_id"]],
                key=d["key"],
                decision={
                    "decision": str(decision),
                    "args": d["decision_args"],
                    "message": d["message"],
                    "reviewer": d["decided_by"],
                },
            )


def _settle(thread_id: str, *, agent: Agent, exported_status: str) -> None:
    backend = get_backend()
    head = backend.get(thread_id=thread_id)
    if exported_status in (ThreadStatus.DONE, ThreadStatus.CANCELLED, ThreadStatus.FAILED):
        backend.set_status(thread_id=thread_id, status=ThreadStatus(exported_status))
        return
    open_keys = set(head.metadata.get(GATES_KEY, [])) - set(
        decisions_at(thread_id=thread_id, checkpoint_id=head.id)
    )
    gates = (
        [
            g
            for g in agent.pending_gates(agent.state.model_validate(head.values), head.next[0])
            if g.key in open_keys
        ]
        if head.next
        else []
    )
    if gates:
        signals.gates_opened.send(
            sender=Agent, thread_id=thread_id, agent=agent.name, checkpoint=head, gates=gates
        )
        backend.set_status(thread_id=thread_id, status=ThreadStatus.WAITING)
