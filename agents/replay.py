"""Replay an exported thread's model steps against the current agent code and report where the
agent now behaves differently. Tools are not run: no side effect is repeated."""

from dataclasses import dataclass
from typing import Any, cast

from agents.graph import Agent, StepContext
from agents.loading import upgraded_values
from agents.messages import message_errors
from agents.registry import registry


class NotReplayable(ValueError):
    """A recorded model step replay has nothing to compare with (no message, or not a message)."""


@dataclass(frozen=True)
class Divergence:
    step: int
    expected: dict[str, Any]
    got: dict[str, Any]


@dataclass(frozen=True)
class ReplayReport:
    agent: str
    replayed: int
    divergences: list[Divergence]
    steps: int = 0
    """Checkpoints on the main line after the first: 0 means there was nothing to replay."""

    @property
    def ok(self) -> bool:
        return not self.divergences


def behaviour(message: dict[str, Any]) -> dict[str, Any]:
    """What counts as the agent's behaviour in an assistant message: its text and its tool calls."""
    calls = [
        (c["function"]["name"], c["function"].get("arguments", "")) for c in message.get("tool_calls") or []
    ]
    return {"content": message.get("content") or "", "tool_calls": calls}


def replay(document: dict[str, Any]) -> ReplayReport:
    """Re-run every model step of the exported main line from its parent's state. Call with a
    document approvals.actions.transfer.check_export accepted (each checkpoint listed after its
    parent, the head among them; every state one its agent reads). Raise NotReplayable for a
    model step that recorded no message."""
    agent = registry.get(document["thread"]["agent"])
    by_id = {c["id"]: c for c in document["checkpoints"]}
    # The first is the root, as import reads it: a parent it names was pruned (an id listed
    # further on included, which would otherwise close a cycle).
    parent_of = {c["id"]: by_id[c["parent_id"]] for c in document["checkpoints"][1:]}
    line = _main_line(parent_of, by_id[document["thread"]["head"]])
    divergences = []
    replayed = 0
    for checkpoint in line:
        parent = parent_of.get(checkpoint["id"])
        if checkpoint["node"] != "model" or parent is None:
            continue
        replayed += 1
        expected = behaviour(_recorded_reply(agent, checkpoint))
        # Both read at the current schema version, as the agent under test sees a stored state.
        state = agent.state.model_validate(_values(agent, parent))
        ctx = StepContext(thread_id="replay", checkpoint_id=parent["id"], decisions={}, run_once=_no_tools)
        step = agent.nodes["model"](state, ctx)
        got = behaviour(step.update["messages"][-1])
        if got != expected:
            divergences.append(Divergence(step=checkpoint["step"], expected=expected, got=got))
    return ReplayReport(
        agent=agent.name, replayed=replayed, divergences=divergences, steps=max(len(line) - 1, 0)
    )


def _recorded_reply(agent: Agent, checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The message a model step recorded: the last of its state's messages."""
    messages = _values(agent, checkpoint).get("messages")
    where = f"checkpoint {checkpoint['id']} (step {checkpoint['step']}), a model step,"
    if errors := message_errors(messages):
        field, problem = next(iter(errors.items()))
        raise NotReplayable(f"{where} holds messages not in the stored shape: {field}: {problem}")
    if not messages:
        raise NotReplayable(f"{where} recorded no message")
    return cast(dict[str, Any], messages[-1])


def _values(agent: Agent, checkpoint: dict[str, Any]) -> dict[str, Any]:
    return upgraded_values(agent, checkpoint["values"], schema_version=checkpoint["schema_version"])


def _main_line(parent_of: dict[str, dict[str, Any]], head: dict[str, Any]) -> list[dict[str, Any]]:
    """The head and its ancestors, root first. Each parent is listed before its child, so this ends."""
    line = [head]
    while (parent := parent_of.get(line[-1]["id"])) is not None:
        line.append(parent)
    return list(reversed(line))


def _no_tools(key: str, fn: Any) -> Any:
    raise RuntimeError("replay runs model steps only")
