"""OpenAI Agents SDK agents written the way the SDK's docs show, behind Gatehouse's gates: each
segment runs through the SDK's real classes against the offline model, over HTTP (its refunds
script: lookup_order, then issue_refund per order)."""

import json
from typing import Any

import pytest
from pydantic import BaseModel

from agents.adapters.openai_agents_sdk import OpenAIAgentsSDKAgent
from agents.adapters.openai_sdk import Agent, ToolContext, function_tool, sdk
from agents.gates import HumanDecision
from agents.graph import Step
from agents.tools import Approval, Decision
from tests.segments import Note, check_problems, edit_the_note, run

pytestmark = pytest.mark.django_db(transaction=True)

APPROVAL = Approval(
    queue="refunds",
    decisions=(Decision.APPROVE, Decision.EDIT, Decision.REJECT),
    description="Refund {order_id}",
)
issued: list[tuple[str, int]] = []


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return json.dumps({"order_id": order_id, "total_cents": 4250 if order_id == "ORD-1001" else 1999})


@function_tool(needs_approval=True)
def issue_refund(ctx: ToolContext, order_id: str, amount_cents: int) -> str:
    """Refund an order."""

    def issue() -> dict[str, Any]:
        issued.append((order_id, amount_cents))
        return {"status": "issued", "amount_cents": amount_cents, "refund_id": "R-1"}

    return json.dumps(ctx.context.run_once(ctx.tool_call_id, issue))


def then(agent: Any, state: Any, step: Step) -> Any:
    """The state after `step` (its messages appended, as the checkpoint's reducers do)."""
    return agent.state.model_validate(
        {**state.model_dump(), **step.update, "messages": state.messages + step.update["messages"]}
    )


def test_two_parallel_calls_of_a_gated_tool_are_two_gates_decided_apart(live_server_url: str) -> None:
    issued.clear()
    support = Agent(name="support", tools=[lookup_order, issue_refund])
    agent = OpenAIAgentsSDKAgent(name="parallel", agent=support, gates={"issue_refund": APPROVAL})
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001 and ORD-1002"))
    waiting = run(agent, state)
    first, second = waiting.gates
    assert [g.description for g in waiting.gates] == ["Refund ORD-1001", "Refund ORD-1002"]

    done = run(
        agent,
        then(agent, state, waiting),
        {
            first.key: HumanDecision(
                kind=Decision.EDIT, reviewer="ada", args={"order_id": "ORD-1001", "amount_cents": 100}
            ),
            second.key: HumanDecision(kind=Decision.REJECT, reviewer="ada", message="Already refunded"),
        },
    )

    assert done.goto is None and issued == [("ORD-1001", 100)]
    results = [m["content"] for m in done.update["messages"] if m["role"] == "tool"]
    assert results[-1] == "Rejected by a human reviewer: Already refunded"


def test_an_agent_used_as_a_tool_with_a_tool_needing_approval_fails_the_checks(live_server_url: str) -> None:
    refunder = Agent(name="refunder", tools=[lookup_order, issue_refund])
    triage = Agent(name="triage", tools=[refunder.as_tool(tool_name="refunds", tool_description="Refunds.")])
    problems = check_problems(OpenAIAgentsSDKAgent(name="sdk_as_tool", agent=triage, gates={}))

    # Before, it registered; its first run stopped at a call no gate asks about, mid-run.
    assert problems == [
        "Agent 'sdk_as_tool': tool 'refunds' runs agent 'refunder', whose tool 'issue_refund' needs "
        "approval: a call inside an agent used as a tool cannot be gated; give that tool to this agent"
    ]


@function_tool(name_override="issue_refund", needs_approval=True)  # what the offline model proposes
def issue_refund_noted(ctx: ToolContext, order_id: str, amount_cents: int, note: Note | None = None) -> str:
    """Refund an order, with a note for the ledger."""
    issued.append((order_id, amount_cents, note))  # type: ignore[arg-type]
    return json.dumps({"status": "issued", "amount_cents": amount_cents})


def test_an_edit_of_a_nested_model_argument_reaches_the_tool_validated_and_a_misspelt_field_is_refused(
    live_server_url: str,
) -> None:
    issued.clear()
    support = Agent(name="support", tools=[lookup_order, issue_refund_noted])
    agent = OpenAIAgentsSDKAgent(name="noted", agent=support, gates={"issue_refund": APPROVAL})
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))
    done = edit_the_note(agent, state, then=then)

    assert done.goto is None
    assert issued == [("ORD-1001", 4250, Note(text="goodwill", tags=["vip"]))]


def test_max_turns_bounds_the_whole_run_across_its_approval(live_server_url: str) -> None:
    issued.clear()
    support = Agent(name="support", tools=[lookup_order, issue_refund])
    # The offline refunds script takes three turns: look up, propose (the gate), report.
    agent = OpenAIAgentsSDKAgent(name="turns", agent=support, gates={"issue_refund": APPROVAL}, max_turns=2)
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))
    waiting = run(agent, state)
    [gate] = waiting.gates
    assert waiting.update["run_state"]["max_turns"] == 2

    # A stored state cannot lift the agent's limit (an import, an old checkpoint).
    lifted = then(agent, state, waiting).model_copy(
        update={"run_state": {**waiting.update["run_state"], "max_turns": None}}
    )
    with pytest.raises(sdk.MaxTurnsExceeded, match=r"Max turns \(2\) exceeded"):
        run(agent, lifted, {gate.key: HumanDecision(kind=Decision.APPROVE, reviewer="ada")})

    bad = OpenAIAgentsSDKAgent(name="turns", agent=support, gates={"issue_refund": APPROVAL}, max_turns=0)
    assert bad.definition_errors() == ["max_turns is 0: give a number of turns over 0, or None"]


class RefundSummary(BaseModel):
    summary: str


def test_a_structured_output_after_an_approval_is_the_runs_answer(live_server_url: str) -> None:
    issued.clear()
    support = Agent(name="support", tools=[lookup_order, issue_refund], output_type=RefundSummary)
    agent = OpenAIAgentsSDKAgent(name="structured", agent=support, gates={"issue_refund": APPROVAL})
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))
    waiting = run(agent, state)
    [gate] = waiting.gates

    done = run(
        agent, then(agent, state, waiting), {gate.key: HumanDecision(kind=Decision.APPROVE, reviewer="ada")}
    )

    assert done.goto is None and issued == [("ORD-1001", 4250)]
    answer = json.loads(done.update["messages"][-1]["content"])
    assert answer == {"summary": "Refund of $42.50 issued for order ORD-1001 (refund R-1)."}
    assert done.update["history"][-1]["content"][0]["text"] == done.update["messages"][-1]["content"]
