"""The gate protocol: the one seam between an agent runtime and the people who decide.

Any runtime (the step runtime for native agents, an adapter for another framework, an import)
goes through these functions and nothing else:

1. open_gates() at a checkpoint it just wrote, inside that transaction: the checkpoint's
   metadata names the gates (gate_metadata), and approvals opens a request for each.
2. record_decision() stores a HumanDecision for one gate, as a pending write at the checkpoint
   (the checkpoint store, not the inbox, is what the runtime reads).
3. resume_if_decided() sets the thread running again once nothing at its head is undecided:
   undecided() is the one definition, used by decide, expire, undo, policies, resume and import.
4. supersede_gates() withdraws open gates when an operator moves the head past them.
5. The runtime reads decisions_for() and the agent turns each into its next input
   (Agent.validate_edit says which edited arguments it accepts).
"""

from dataclasses import asdict, dataclass
from typing import Any

from agents import signals
from agents.dispatch import after_commit
from agents.graph import Gate
from agents.messages import MAX_CALL_ID_CHARS
from agents.tools import Decision
from checkpoints.backends import get_backend
from checkpoints.backends.base import CheckpointData, CheckpointSummary, ThreadData
from checkpoints.models import ThreadStatus

GATES_KEY = "gates"  # checkpoint metadata: the keys of the gates opened at this checkpoint
DECISION_PREFIX = "decision:"  # pending-write task id of a gate's decision
DECISION_KIND = "decision"


@dataclass(frozen=True)
class HumanDecision:
    """What was decided about one gate, as the agent receives it."""

    kind: Decision
    args: dict[str, Any] | None = None
    """The edited arguments (kind == edit), already valid for the action."""
    message: str = ""
    """A rejection's reason, or the response that stands in for the action's result."""
    reviewer: str = ""
    """The deciding reviewer's username ("" for an automatic decision)."""
    expired: bool = False
    """Rejected because nobody decided before the gate's expiry."""
    policy: str = ""
    """The policy that decided it automatically ("'name' v3"), if one did."""

    def as_write(self) -> dict[str, Any]:
        """The stored form (the pending write's value): the kind is stored as "decision"."""
        stored = asdict(self)
        stored["decision"] = str(stored.pop("kind"))
        return stored

    @classmethod
    def from_write(cls, value: dict[str, Any]) -> "HumanDecision":
        return cls(
            kind=Decision(value["decision"]),
            args=value.get("args"),
            message=value.get("message") or "",
            reviewer=value.get("reviewer") or "",
            expired=bool(value.get("expired")),
            policy=value.get("policy") or "",
        )


def gate_metadata(gates: list[Gate]) -> dict[str, list[str]]:
    """The metadata a checkpoint that opens `gates` carries (set by the writer, never copied)."""
    return {GATES_KEY: [gate.key for gate in gates]}


class UnkeyableGate(ValueError):
    """A gate nobody could decide: its key (a call's id) is too long to record a decision under.
    The step fails, saying so."""


def unkeyable(gates: list[Gate]) -> str:
    """Why one of `gates` cannot be opened ("" if all can): a gate's key is a tool call's id,
    which a model (or a framework, or a document) chooses, and its decision and result are
    stored under it with a prefix, in a column of bounded length."""
    for gate in gates:
        if len(gate.key) > MAX_CALL_ID_CHARS:
            return (
                f"the tool call id {gate.key[:24]!r}... of {gate.action!r} is {len(gate.key)} characters "
                f"long; a call that needs approval needs an id of at most {MAX_CALL_ID_CHARS}"
            )
    return ""


def open_gates(*, thread_id: str, agent: str, checkpoint: CheckpointData, gates: list[Gate]) -> None:
    """Ask people about `gates` at `checkpoint`. Call inside the transaction that wrote it, with
    the thread locked: requests open atomically with the checkpoint. The only sender. Raise
    UnkeyableGate, rolling the checkpoint back with the caller, for a gate nobody could decide."""
    if problem := unkeyable(gates):
        raise UnkeyableGate(problem)
    if gates:
        signals.gates_opened.send(
            sender=None, thread_id=thread_id, agent=agent, checkpoint=checkpoint, gates=gates
        )


def supersede_gates(*, thread_id: str, checkpoint_id: str | None, reason: str) -> None:
    """Withdraw the open gates of a thread whose head moves past them (an edit, fork or cancel):
    no decision made about them may apply to a state their reviewer did not see. Call inside
    the moving transaction with the thread locked."""
    signals.gates_superseded.send(
        sender=None, thread_id=thread_id, checkpoint_id=checkpoint_id, reason=reason
    )


def decisions_at(*, thread_id: str, checkpoint_id: str) -> dict[str, HumanDecision]:
    """The decisions recorded at a checkpoint, by gate key."""
    writes = get_backend().get_writes(thread_id=thread_id, checkpoint_id=checkpoint_id)
    return {
        task_id.removeprefix(DECISION_PREFIX): HumanDecision.from_write(value)
        for task_id, (kind, value) in writes.items()
        if kind == DECISION_KIND
    }


def decisions_for(checkpoint: CheckpointSummary) -> dict[str, HumanDecision]:
    """decisions_at(checkpoint), read only where it opened gates: a decision is always for a
    gate of its checkpoint, so most steps (no gate at their head) need no query for it."""
    if not checkpoint.metadata.get(GATES_KEY):
        return {}
    return decisions_at(thread_id=checkpoint.thread_id, checkpoint_id=checkpoint.id)


def undecided(checkpoint: CheckpointSummary) -> set[str]:
    """The keys of the gates at `checkpoint` that have no recorded decision."""
    return set(checkpoint.metadata.get(GATES_KEY, [])) - set(decisions_for(checkpoint))


def record_decision(*, thread_id: str, checkpoint_id: str, key: str, decision: HumanDecision) -> bool:
    """Store the decision for gate `key`, for the resuming step to apply. Call inside the deciding
    transaction with the thread locked. False if the gate already had one (it stands)."""
    return get_backend().put_write(
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        task_id=DECISION_PREFIX + key,
        kind=DECISION_KIND,
        value=decision.as_write(),
    )


def status_at(head: CheckpointData) -> ThreadStatus:
    """The status a thread takes at `head` when nothing holds it: waiting while a gate there is
    undecided, else running on (or done when there is no next node)."""
    if undecided(head):
        return ThreadStatus.WAITING
    return ThreadStatus.RUNNING if head.next else ThreadStatus.DONE


def resume_if_decided(*, thread: ThreadData, checkpoint_id: str, by_person: bool) -> bool:
    """Set a thread waiting at `checkpoint_id` running again once every gate there is decided.
    Call inside the deciding transaction with the thread locked (`thread` as the lock read it);
    the step is enqueued on commit, on RESUME_QUEUE if a person's decision was the last
    (by_person), else with new threads' steps (a policy's, an expiry's). A paused thread keeps
    its decisions until an operator resumes it."""
    if thread.head_id != checkpoint_id or thread.status != ThreadStatus.WAITING:
        return False
    backend = get_backend()
    # The header names the gates: the state's values are not needed to count decisions.
    if undecided(backend.summary(thread_id=thread.id, checkpoint_id=checkpoint_id)):
        return False
    resumed = backend.set_status(
        thread_id=thread.id, status=ThreadStatus.RUNNING, expected_head=checkpoint_id
    )
    if resumed:
        after_commit(
            thread_id=thread.id, checkpoint_id=checkpoint_id, status=ThreadStatus.RUNNING, by_person=by_person
        )
    return resumed
