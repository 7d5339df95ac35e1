"""Export a thread (or one branch) as a JSON document, and import one into this installation:
a production trace becomes a reproducible test case.

An import never carries authority. The decisions a document lists were made (if at all)
somewhere else, by people this installation cannot vouch for: they are kept as history on the
thread (ImportedDecision rows, exported again, marked `imported`), never written where the
runtime reads decisions.
Every gate the imported head still needs is asked afresh here.
"""

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.utils import timezone

from agents import gates as gate_protocol
from agents.actions import InvalidInput, check_state
from agents.gates import GATES_KEY
from agents.graph import Agent, Gate
from agents.registry import registry
from approvals.actions.audit import do_audit
from approvals.models import ApprovalRequest, ApprovalStatus, ImportedDecision
from approvals.transfer_format import FORMAT, CheckpointDoc, ThreadDocument, parse_document
from checkpoints.backends import get_backend
from checkpoints.backends.base import CheckpointData, CheckpointNotFound, NewCheckpoint, ThreadData
from checkpoints.ids import THREAD_ID_RULE, is_valid_tenant, is_valid_thread_id
from checkpoints.models import Thread, ThreadStatus
from checkpoints.store import TENANT_METADATA_KEY

HISTORY_KEY = "imported_decisions"
"""Checkpoint metadata where imports once kept a document's decisions (readable, so they are
ImportedDecision rows now): still exported, never taken from a document."""
KEPT_AS_EXPORTED = (ThreadStatus.DONE, ThreadStatus.FAILED, ThreadStatus.CANCELLED)
"""Statuses an import keeps as exported (a failed thread stopped at a gate stays failed)."""


def export_thread(thread: Thread, *, branch: str | None = None) -> dict[str, Any]:
    """Every checkpoint (or only branch's ancestors), the decisions taken, and the schema version.
    Raise CheckpointNotFound for a branch that is not a checkpoint of the thread."""
    backend = get_backend()
    # Parents before children: a child's step is its parent's plus one.
    checkpoints = sorted(backend.list(thread_id=thread.id), key=lambda c: c.step)
    status = thread.status
    if branch:
        by_id = {c.id: c for c in checkpoints}
        keep = _ancestors(by_id, branch)
        if not keep:
            raise CheckpointNotFound(thread.id, branch)
        checkpoints = [c for c in checkpoints if c.id in keep]
        if branch != str(thread.head_id):
            status = _left_at(by_id[branch])
    elif thread.head_id:
        checkpoints = _head_tree(checkpoints, head=str(thread.head_id))
    ids = {c.id for c in checkpoints}
    requests = (
        ApprovalRequest.objects.filter(thread=thread).select_related("decided_by").order_by("created_at")
    )
    history = _imported(thread, checkpoints)
    return {
        "format": FORMAT,
        "exported_at": timezone.now().isoformat(),
        "thread": {
            "id": thread.id,
            "agent": thread.agent,
            "status": status,
            "head": branch or (str(thread.head_id) if thread.head_id else None),
            "offline_model": bool(thread.metadata.get("offline_model")),
            # Only when set: a document without it still imports where the field is unknown.
            **({"tenant": tenant} if (tenant := thread.metadata.get(TENANT_METADATA_KEY)) else {}),
        },
        "checkpoints": [_checkpoint(c) for c in checkpoints],
        "decisions": history + [_decision(r) for r in requests if str(r.checkpoint_id) in ids],
    }


def _head_tree(checkpoints: list[CheckpointData], *, head: str) -> list[CheckpointData]:
    """The checkpoints in the head's tree, in their order. Retention re-links a checkpoint whose
    ancestors it all pruned to no parent: once it prunes the one a fork branched from, the old
    branch is a tree of its own, and a document holds one (the old branch exports by itself)."""
    roots: dict[str, str] = {}
    for c in checkpoints:  # by step: each parent before its children
        roots[c.id] = roots.get(c.parent_id or "", c.id)
    return [c for c in checkpoints if roots[c.id] == roots.get(head)]


def _left_at(leaf: CheckpointData) -> ThreadStatus:
    """The status of a branch the thread has left: the thread's own status is its head's (a done
    thread's old branch may end at a gate, which an import would then never run)."""
    return ThreadStatus.PAUSED if leaf.next else ThreadStatus.DONE


def _imported(thread: Thread, checkpoints: list[CheckpointData]) -> list[dict[str, Any]]:
    """The decisions imports kept at these checkpoints, in the document's order, marked imported
    (an import made before ImportedDecision kept them in the checkpoint's metadata)."""
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    kept = ImportedDecision.objects.filter(thread=thread).order_by("position")
    for checkpoint_id, record in kept.values_list("checkpoint_id", "record"):
        rows[str(checkpoint_id)].append(record)
    return [
        {**record, "checkpoint_id": c.id, "imported": True}
        for c in checkpoints
        for record in [*c.metadata.get(HISTORY_KEY, []), *rows[c.id]]
    ]


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


@dataclass(frozen=True)
class ValidImport:
    """A document checked against its agent, ready to write under thread_id."""

    document: ThreadDocument
    agent: Agent
    thread_id: str
    checkpoints: list[tuple[CheckpointDoc, dict[str, Any]]]
    """Parents first, the head last; each with its values upgraded and validated."""
    gates: dict[str, list[Gate]]
    """The gates each checkpoint (by its id in the document) needs before its next node runs."""


def check_import(document: Any, *, thread_id: str | None, rename_with: str = "?thread_id=") -> ValidImport:
    """Validate a whole export (shape, tree, every state against its agent) and the id to
    import it under. Raise InvalidExport with a readable message. rename_with: how the caller
    names the id to import under (the API's query parameter, the command's option)."""
    doc = _parsed(document)
    new_id = thread_id if thread_id is not None else doc.thread.id
    if not is_valid_thread_id(new_id):
        what = "thread_id" if thread_id is not None else f"thread.id (import it under {rename_with})"
        raise InvalidExport(f"invalid {what}: {THREAD_ID_RULE}")
    return _checked(doc, thread_id=new_id)


def check_export(document: Any) -> ValidImport:
    """check_import's checks of the document itself, for a reader that writes nothing
    (replay_thread): it refuses what an import refuses, in the same words. The id to import
    under is not checked (an import may rename it); thread_id is the document's."""
    doc = _parsed(document)
    return _checked(doc, thread_id=doc.thread.id)


def _parsed(document: Any) -> ThreadDocument:
    try:
        return parse_document(document)
    except ValueError as exc:
        raise InvalidExport(f"invalid export: {exc}") from exc


def _checked(doc: ThreadDocument, *, thread_id: str) -> ValidImport:
    """The document's tenant, agent, states and gates, each checkpoint's against its agent."""
    if doc.thread.tenant is not None and not is_valid_tenant(doc.thread.tenant):
        raise InvalidExport(f"invalid export: thread.tenant: {THREAD_ID_RULE}")
    if doc.thread.agent not in registry.names():
        raise InvalidExport(f"invalid export: unknown agent {doc.thread.agent!r}")
    agent = registry.get(doc.thread.agent)
    checkpoints = [(c, _checked_values(c, agent)) for c in doc.parents_first()]
    gates = {c.id: _checked_gates(c, values, agent) for c, values in checkpoints}
    for c, values in checkpoints:
        if problem := agent.import_problem(values, exported_from=doc.thread.id):
            raise InvalidExport(f"invalid export: checkpoint {c.id}: {problem}")
        # After the agent's own reasons, which name the fault more closely.
        if problem := gate_protocol.unkeyable(gates[c.id]):
            raise InvalidExport(f"invalid export: checkpoint {c.id}: {problem}")
    return ValidImport(document=doc, agent=agent, thread_id=thread_id, checkpoints=checkpoints, gates=gates)


def _checked_values(c: CheckpointDoc, agent: Agent) -> dict[str, Any]:
    where = f"invalid export: checkpoint {c.id}"
    unknown = [n for n in [c.node, *c.next] if n and n not in agent.nodes]
    if unknown:
        raise InvalidExport(f"{where}: {agent.name} has no node {unknown[0]!r}")
    if c.schema_version > agent.state.schema_version:
        raise InvalidExport(
            f"{where}: schema version {c.schema_version} is newer than this installation's "
            f"{agent.state.schema_version}"
        )
    try:
        values = agent.state.upgrade(dict(c.values), from_version=c.schema_version)
        return check_state(agent, values)
    except InvalidInput as exc:
        raise InvalidExport(f"{where}: {exc}") from exc
    except Exception as exc:  # an agent's upgrade function meeting data it never expected
        raise InvalidExport(f"{where}: cannot upgrade its values: {type(exc).__name__}: {exc}") from exc


def _checked_gates(c: CheckpointDoc, values: dict[str, Any], agent: Agent) -> list[Gate]:
    """The gates the checkpoint needs, worked out now: a state whose gates cannot be read is the
    document's fault (a 400 naming it), not a failure when the thread is written or runs."""
    try:
        return _gates(agent, values=values, next_nodes=c.next)
    except Exception as exc:  # an agent's gate logic meeting data it never wrote
        raise InvalidExport(
            f"invalid export: checkpoint {c.id}: cannot work out the gates it needs: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def do_import_thread(valid: ValidImport, *, user: AbstractBaseUser | AnonymousUser | None) -> ThreadData:
    """Recreate an exported thread (checkpoints as a tree with their times, decisions as history,
    its tenant). Done, failed or cancelled as exported; otherwise waiting at the gates its head
    needs, asked afresh (a failed one's too), else paused. Audited as `user` (None: the command
    line). Raise ThreadExists if the id is taken."""
    doc, agent, new_id = valid.document, valid.agent, valid.thread_id
    history = _history(doc)
    metadata: dict[str, Any] = {"imported_from": doc.thread.id, "offline_model": doc.thread.offline_model}
    if doc.thread.tenant:
        metadata[TENANT_METADATA_KEY] = doc.thread.tenant
    backend = get_backend()
    with transaction.atomic():
        (root, root_values), *rest = valid.checkpoints
        _, head = backend.create_thread(
            thread_id=new_id,
            agent=agent.name,
            status=ThreadStatus.PAUSED,
            first=_new(root, root_values, valid=valid),
            metadata=metadata,
        )
        mapped = {root.id: head.id}
        for c, values in rest:
            head = backend.put(
                thread_id=new_id,
                parent_id=mapped[c.parent_id or ""],
                expected_head=head.id,
                checkpoint=_new(c, values, valid=valid),
                status=ThreadStatus.PAUSED,
            )
            mapped[c.id] = head.id
        ImportedDecision.objects.bulk_create(
            ImportedDecision(thread_id=new_id, checkpoint_id=mapped[cid], position=i, record=record)
            for i, (cid, record) in enumerate(history)
        )
        _settle(
            new_id,
            agent=agent,
            head=head,
            gates=valid.gates[doc.thread.head],
            exported_status=doc.thread.status,
        )
        thread = backend.get_thread(thread_id=new_id)
        do_audit(
            actor=user,
            action="thread.import",
            thread_id=new_id,
            checkpoint_id=thread.head_id or "",
            data={
                "imported_from": doc.thread.id,
                "checkpoints": len(valid.checkpoints),
                "decisions_kept_as_history": len(history),
            },
        )
    return thread


def _history(doc: ThreadDocument) -> list[tuple[str, dict[str, Any]]]:
    """The document's decisions in its order, as (checkpoint id in the document, record); a
    pending request decided nothing."""
    return [
        (d.checkpoint_id, d.model_dump(mode="json", exclude={"checkpoint_id", "imported"}))
        for d in doc.decisions
        if d.status != ApprovalStatus.PENDING
    ]


def _new(c: CheckpointDoc, values: dict[str, Any], *, valid: ValidImport) -> NewCheckpoint:
    # The keys the runtime and pages read are set here, never taken from the document; the
    # history key is the importer's own (old imports wrote it), now kept in ImportedDecision.
    metadata = {k: v for k, v in c.metadata.items() if k not in (GATES_KEY, HISTORY_KEY)}
    metadata.update(gate_protocol.gate_metadata(valid.gates[c.id]))
    return NewCheckpoint(
        values=values,
        source=c.source,
        next=list(c.next),
        node=c.node,
        created_by=c.created_by,
        schema_version=valid.agent.state.schema_version,
        metadata=metadata,
        created_at=c.created_at,
    )


def _gates(agent: Agent, *, values: dict[str, Any], next_nodes: list[str]) -> list[Gate]:
    if not next_nodes:
        return []
    return agent.pending_gates(agent.state.model_validate(values), next_nodes[0])


def _settle(
    thread_id: str, *, agent: Agent, head: CheckpointData, gates: list[Gate], exported_status: str
) -> None:
    """Done, failed or cancelled as exported, else waiting at the head's gates (or paused). The
    gates are asked afresh unless it was cancelled: a failed thread waits for them once an
    operator resumes it, as a paused one keeps its requests."""
    backend = get_backend()
    if exported_status in KEPT_AS_EXPORTED:
        backend.set_status(thread_id=thread_id, status=ThreadStatus(exported_status))
    elif gates:
        # Waiting first: a policy that decides every gate as it opens resumes the thread.
        backend.set_status(thread_id=thread_id, status=ThreadStatus.WAITING)
    if gates and exported_status != ThreadStatus.CANCELLED:
        gate_protocol.open_gates(thread_id=thread_id, agent=agent.name, checkpoint=head, gates=gates)
