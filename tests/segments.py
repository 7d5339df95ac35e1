"""A framework agent's segments run directly (no worker, no checkpoint): `run_segment` through
the framework's real classes against the offline model, the nested-edit scenario both adapters
must pass, and what `manage.py check` says of an agent."""

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from agents.checks import check_agents
from agents.gates import HumanDecision
from agents.graph import Step, StepContext
from agents.registry import registry
from agents.tools import Decision, ToolArgumentsError


class Note(BaseModel):
    text: str
    tags: list[str] = []


def run(agent: Any, state: Any, decisions: dict[str, HumanDecision] | None = None) -> Step:
    ctx = StepContext(
        thread_id="t", checkpoint_id="c", decisions=decisions or {}, run_once=lambda _, fn: fn()
    )
    return agent.run_segment(state, ctx)


def edit_the_note(agent: Any, state: Any, *, then: Callable[[Any, Any, Step], Any]) -> Step:
    """Run to the issue_refund gate (its tool takes a `note: Note`); a reviewer's edit misspelling
    a field of the note is refused, naming it (the decision endpoint's 400; it was dropped and the
    call approved), and the corrected edit runs. The segment after the decision."""
    waiting = run(agent, state)
    [gate] = waiting.gates
    misspelt = {"order_id": "ORD-1001", "amount_cents": 4250, "note": {"text": "goodwill", "tgas": ["vip"]}}
    with pytest.raises(ToolArgumentsError) as refused:
        agent.validate_edit("issue_refund", misspelt)
    assert refused.value.errors == {"note.tgas": "Tgas is not a field of note"}
    edit = agent.validate_edit("issue_refund", {**misspelt, "note": {"text": "goodwill", "tags": ["vip"]}})
    decided = {gate.key: HumanDecision(kind=Decision.EDIT, reviewer="ada", args=edit)}
    return run(agent, then(agent, state, waiting), decided)


def check_problems(agent: Any) -> list[str]:
    """What `manage.py check` reports with `agent` registered (unregistered after)."""
    registry.register(agent)
    try:
        return [m.msg for m in check_agents()]
    finally:
        registry.unregister(agent.name)
