"""Replay an exported thread's model steps against the current agent code and report where the
agent now behaves differently. Tools are not run: no side effect is repeated."""

from dataclasses import dataclass
from typing import Any

from agents.graph import Agent, StepContext
from agents.loading import upgraded_values
from agents.registry import registry


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
    """Re-run every model step of the exported main line from its parent's state."""
    agent = registry.get(document["thread"]["agent"])
    by_id = {c["id"]: c for c in document["checkpoints"]}
    line = _main_line(by_id, document["thread"]["head"])
    divergences = []
    replayed = 0
    for checkpoint in line:
        parent = by_id.get(checkpoint["parent_id"] or "")
        if checkpoint["node"] != "model" or parent is None:
            continue
        replayed += 1
        # Both read at the current schema version, as the agent under test sees a stored state.
        state = agent.state.model_validate(_values(agent, parent))
        ctx = StepContext(thread_id="replay", checkpoint_id=parent["id"], decisions={}, run_once=_no_tools)
        step = agent.nodes["model"](state, ctx)
        got, expected = (
            behaviour(step.update["messages"][-1]),
            behaviour(_values(agent, checkpoint)["messages"][-1]),
        )
        if got != expected:
            divergences.append(Divergence(step=checkpoint["step"], expected=expected, got=got))
    return ReplayReport(
        agent=agent.name, replayed=replayed, divergences=divergences, steps=max(len(line) - 1, 0)
    )


def _values(agent: Agent, checkpoint: dict[str, Any]) -> dict[str, Any]:
    return upgraded_values(agent, checkpoint["values"], schema_version=checkpoint["schema_version"])


def _main_line(by_id: dict[str, dict[str, Any]], head: str | None) -> list[dict[str, Any]]:
    line = []
    node = by_id.get(head or "")
    while node is not None:
        line.append(node)
        node = by_id.get(node["parent_id"] or "")
    return list(reversed(line))


def _no_tools(key: str, fn: Any) -> Any:
    raise RuntimeError("replay runs model steps only")
