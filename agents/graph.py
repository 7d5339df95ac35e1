"""What an agent is: a typed state, named nodes (steps), and gates where a human decides."""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.state import State, add_messages, new_message_id
from agents.tools import Approval, ToolArgumentsError

if TYPE_CHECKING:
    from agents.gates import HumanDecision

AGENT_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")


@dataclass(frozen=True)
class Gate:
    """One proposed action that waits for a human decision before the next step runs."""

    key: str
    """Unique within the checkpoint: the tool call id."""
    action: str
    args: dict[str, Any]
    approval: Approval
    description: str = ""
    asks_again: str = ""
    """The key of the gate this one asks again under a new key (a LangGraph interrupt raised anew
    after an edit): its request takes the place of that gate's superseded request."""


@dataclass(frozen=True)
class Step:
    """What a node returns: a state update, the next node (None ends the run), any gates."""

    update: dict[str, Any]
    goto: str | None = None
    gates: list[Gate] = field(default_factory=list)
    resumed: bool = False
    """True when the step applied human decisions (its checkpoint's source is `resume`)."""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepContext:
    """Where a node runs, and the recorded results it must reuse."""

    thread_id: str
    checkpoint_id: str
    decisions: "dict[str, HumanDecision]"
    """Human decisions at this checkpoint, by gate key."""
    run_once: Callable[[str, Callable[[], Any]], Any]
    """run_once(key, fn): fn's result, computed at most once per (checkpoint, key)."""


Node = Callable[[Any, StepContext], Step]


@dataclass(frozen=True)
class Retention:
    """How long a thread's checkpoints are kept (None: no limit). Pruning deletes those older
    than ttl_days or beyond the keep_last newest; never the head, nor one an approval needs."""

    ttl_days: int | None = None
    keep_last: int | None = None


def retention_for(agent_name: str) -> Retention | None:
    """The retention of a registered agent (settings.CHECKPOINT_RETENTION_SOURCE)."""
    from agents.registry import UnknownAgent, registry

    try:
        return registry.get(agent_name).retention
    except UnknownAgent:
        return None


@dataclass
class Agent:
    name: str
    state: type[State]
    nodes: dict[str, Node]
    start: str
    description: str = ""
    retention: Retention = field(default_factory=Retention)

    def __str__(self) -> str:
        # How `manage.py check` names it before each problem: the dataclass repr runs to pages.
        return f"agent {self.name!r}"

    def initial_values(self, text: str) -> dict[str, Any]:
        """Build the input checkpoint's values from a user's first message."""
        return self.state.apply(self.state().model_dump(mode="json"), self.input_update(text))

    def pending_gates(self, state: Any, next_node: str) -> list[Gate]:
        """The gates that must be decided before next_node may run from this state (after an
        operator's edit or a fork, approvals are asked afresh)."""
        return []

    # The agent's say in the gate protocol (agents.gates): what its gated actions are, and how a
    # reviewer's edit becomes its input. ToolAgent answers from its tools; an adapter for another
    # framework answers for its own.

    def approval_for(self, action: str) -> Approval | None:
        """The gate of `action`, if it is gated."""
        return None

    def approvals(self) -> list[Approval]:
        """Every gate this agent may open (for the queues it names)."""
        return []

    def gated_actions(self) -> frozenset[str] | None:
        """The names of the actions this agent gates (what a policy may name), or None when it
        cannot list them: any action may reach a gate (a LangGraph interrupt names its own)."""
        return None

    def edit_schema(self, action: str) -> dict[str, Any]:
        """The JSON schema of `action`'s arguments, for a reviewer's edit form ({}: no form)."""
        return {}

    def validate_edit(self, action: str, args: Any) -> dict[str, Any]:
        """The edited arguments as `action` will receive them; ToolArgumentsError if it cannot."""
        raise ToolArgumentsError(action, {"__all__": f"{action!r} cannot be run with edited arguments"})

    def checked_args(self, action: str, args: dict[str, Any]) -> dict[str, Any]:
        """The proposed arguments as `action` will read them (a number the model sent as text,
        as the number): what reviewers see and policies judge. Ones it refuses stay as proposed."""
        try:
            return self.validate_edit(action, args)
        except ToolArgumentsError:
            return args

    def import_problem(self, values: dict[str, Any], *, exported_from: str) -> str:
        """Why an imported state (of a thread exported as `exported_from`) cannot stand in this
        installation, "" if it can: a framework whose state names records of its own store
        checks them here (LangGraph's checkpoints and their interrupts)."""
        return ""

    def side_effects_after(self, *, origin: dict[str, Any], head: dict[str, Any]) -> list[dict[str, Any]]:
        """Gated actions that ran between the states `origin` and `head` (a fork from origin may
        run them again): [{"key", "tool", "arguments", "result"}], `key` the call's gate key.
        Needed only for effects no gate recorded: replay_warnings also lists every result
        run_once recorded under a gate's key on the branch, less those named here by key."""
        return []

    fork_note = ""
    """What a fork of this agent's thread runs again, where it differs from native agents (shown
    on the fork form)."""

    edit_note = ""
    """What an operator may edit in this agent's state and what follows, where it differs from
    native agents (shown on the edit form)."""

    state_editable = True
    """False: operators cannot edit this agent's state here (its state page is read-only and any
    change is refused); edit_errors still checks each edit of an editable one."""

    def edit_errors(self, *, before: dict[str, Any], after: dict[str, Any]) -> dict[str, str]:
        """Why a person's change of the state from `before` (as stored) to `after` (validated)
        cannot be applied ({} if it can): an adapter whose framework keeps the state may refuse."""
        return {}

    def edited_state(self, *, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        """The state to store for a person's edit from `before` (as stored) to `after` (validated,
        edit_errors passed): an adapter whose framework keeps the state marks the edit for its
        next step to apply there."""
        return after

    def state_errors(self, values: dict[str, Any]) -> dict[str, str]:
        """Field errors the schema cannot express, for a state a person wrote ({} if none)."""
        return {}

    def input_update(self, text: str) -> dict[str, Any]:
        """Turn a user message into a state update (agents with a messages field append it)."""
        if "messages" in self.state.model_fields:
            return {"messages": [{"id": new_message_id(), "role": "user", "content": text}]}
        raise NotImplementedError(f"agent {self.name!r} must define input_update()")

    def definition_errors(self) -> list[str]:
        """Say what is wrong with this definition, for startup checks."""
        errors = []
        if not AGENT_NAME.match(self.name):
            errors.append(f"name {self.name!r} must be lowercase letters, digits, '-' or '_'")
        if not (isinstance(self.state, type) and issubclass(self.state, State)):
            errors.append("state must be a subclass of agents.state.State")
        elif "messages" in self.state.model_fields and add_messages not in (
            self.state.model_fields["messages"].metadata
        ):
            errors.append("state field 'messages' must be Annotated[list[dict], add_messages]")
        if isinstance(self.state, type) and issubclass(self.state, State):
            errors += _upgrade_errors(self.state)
        if self.start not in self.nodes:
            errors.append(f"start node {self.start!r} is not one of its nodes {sorted(self.nodes)}")
        errors += [f"node {n!r} is not callable" for n, fn in self.nodes.items() if not callable(fn)]
        return errors


def _upgrade_errors(state: type[State]) -> list[str]:
    """Every older version must be readable: readers upgrade each checkpoint they load."""
    version = state.schema_version
    return [
        f"state schema_version {version} has no upgrades[{v}] (from version {v} to {v + 1})"
        for v in range(1, version)
        if v not in state.upgrades
    ]
