"""pydantic-ai agents written the way pydantic-ai's docs show, behind Gatehouse's gates: each
segment runs through pydantic-ai's real classes against the offline model, over HTTP (its
refunds script: lookup_order, then issue_refund per order)."""

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field
from pydantic_ai import Agent, ApprovalRequired, DeferredToolRequests, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from agents.adapters.pydanticai import GatehouseDeps, PydanticAIAgent
from agents.gates import HumanDecision
from agents.graph import Step
from agents.tools import Approval, Decision
from tests.segments import Note, check_problems, edit_the_note, run

pytestmark = pytest.mark.django_db(transaction=True)

APPROVAL = Approval(
    queue="refunds",
    decisions=(Decision.APPROVE, Decision.EDIT, Decision.REJECT),
    description="Refund {amount_cents} on {order_id}",
)


def refunds_agent(url: str) -> Agent[GatehouseDeps, Any]:
    """An agent with the offline model's refunds lookup (its issue_refund is the test's)."""
    model = OpenAIChatModel("offline", provider=OpenAIProvider(base_url=f"{url}/offline/v1", api_key="x"))
    agent: Agent[GatehouseDeps, Any] = Agent(
        model, deps_type=GatehouseDeps, output_type=[str, DeferredToolRequests]
    )

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict[str, Any]:
        return {"order_id": order_id, "total_cents": 4250}

    return agent


def then(agent: PydanticAIAgent, state: Any, step: Step) -> Any:
    """The state after `step` (its history appended, as the checkpoint's reducers do)."""
    values = state.model_dump()
    return agent.state.model_validate(
        {**values, **step.update, "history": values["history"] + step.update["history"]}
    )


class RefundRequest(BaseModel):
    order_id: str
    amount_cents: int = Field(gt=0)


def test_a_tool_of_one_model_argument_is_gated_and_edited_by_that_models_fields(live_server_url: str) -> None:
    issued: list[RefundRequest] = []
    support = refunds_agent(live_server_url)

    @support.tool_plain(requires_approval=True)
    def issue_refund(refund: RefundRequest) -> str:  # pydantic-ai offers the model's fields
        issued.append(refund)
        return json.dumps({"status": "issued", "amount_cents": refund.amount_cents})

    agent = PydanticAIAgent(name="one_model", agent=support, gates={"issue_refund": APPROVAL})
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))
    waiting = run(agent, state)

    [gate] = waiting.gates
    assert gate.args == {"order_id": "ORD-1001", "amount_cents": 4250}  # as the edit form's schema
    assert gate.description == "Refund 4250 on ORD-1001"
    assert set(agent.edit_schema("issue_refund")["properties"]) == {"order_id", "amount_cents"}
    edit = agent.validate_edit("issue_refund", {"order_id": "ORD-1001", "amount_cents": "1000"})
    assert edit == {"order_id": "ORD-1001", "amount_cents": 1000}

    decided = {gate.key: HumanDecision(kind=Decision.EDIT, reviewer="ada", args=edit)}
    done = run(agent, then(agent, state, waiting), decided)

    assert done.goto is None
    assert issued == [RefundRequest(order_id="ORD-1001", amount_cents=1000)]
    assert "Refund of $10.00 issued for order ORD-1001" in done.update["messages"][-1]["content"]


def test_an_ungated_tool_asking_for_approval_fails_the_step_clearly(live_server_url: str) -> None:
    support = refunds_agent(live_server_url)

    @support.tool
    def issue_refund(ctx: RunContext[GatehouseDeps], order_id: str, amount_cents: int) -> str:
        if not ctx.tool_call_approved:
            raise ApprovalRequired()  # pydantic-ai's approval decided in the tool
        return "issued"

    @support.tool_plain(requires_approval=True)
    def close_account(email: str) -> str:
        return "closed"

    agent = PydanticAIAgent(name="ungated", agent=support, gates={"close_account": APPROVAL})
    assert agent.definition_errors() == []  # a tool's own ApprovalRequired cannot be seen before a run
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))

    # Before, the step waited on no gate: a thread stuck with nobody asked.
    with pytest.raises(RuntimeError, match=r"\['issue_refund'\] asked for approval .* have no gate"):
        run(agent, state)


def test_a_tool_requiring_approval_without_a_gate_fails_the_checks(live_server_url: str) -> None:
    support = refunds_agent(live_server_url)

    @support.tool_plain(requires_approval=True)
    def issue_refund(order_id: str, amount_cents: int) -> str:
        return "issued"

    problems = check_problems(PydanticAIAgent(name="pai_ungated", agent=support, gates={}))

    # Before, it registered; its first run waited on a call nobody was asked about.
    assert problems == [
        "Agent 'pai_ungated': tool 'issue_refund' requires approval: name it in gates, with its queue"
    ]


def test_an_edit_of_a_nested_model_argument_reaches_the_tool_validated_and_a_misspelt_field_is_refused(
    live_server_url: str,
) -> None:
    issued: list[Any] = []
    support = refunds_agent(live_server_url)

    @support.tool(requires_approval=True)
    async def issue_refund(  # an async tool, with the step's deps
        ctx: RunContext[GatehouseDeps], order_id: str, amount_cents: int, note: Note | None = None
    ) -> str:
        issued.append((ctx.deps.thread_id, order_id, amount_cents, note))
        return json.dumps({"status": "issued", "amount_cents": amount_cents})

    agent = PydanticAIAgent(name="noted", agent=support, gates={"issue_refund": APPROVAL})
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))
    done = edit_the_note(agent, state, then=then)

    assert done.goto is None
    assert issued == [("t", "ORD-1001", 4250, Note(text="goodwill", tags=["vip"]))]


class RefundSummary(BaseModel):
    summary: str
    follow_up: bool = False


def test_a_structured_output_after_an_approval_is_the_conversations_answer(live_server_url: str) -> None:
    model = OpenAIChatModel(
        "offline", provider=OpenAIProvider(base_url=f"{live_server_url}/offline/v1", api_key="x")
    )
    support: Agent[GatehouseDeps, Any] = Agent(
        model, deps_type=GatehouseDeps, output_type=[RefundSummary, DeferredToolRequests]
    )

    @support.tool_plain
    def lookup_order(order_id: str) -> dict[str, Any]:
        return {"order_id": order_id, "total_cents": 4250}

    @support.tool_plain(requires_approval=True)
    def issue_refund(order_id: str, amount_cents: int) -> str:
        return json.dumps({"status": "issued", "amount_cents": amount_cents, "refund_id": "R-1"})

    agent = PydanticAIAgent(name="structured", agent=support, gates={"issue_refund": APPROVAL})
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))
    waiting = run(agent, state)
    [gate] = waiting.gates

    done = run(
        agent, then(agent, state, waiting), {gate.key: HumanDecision(kind=Decision.APPROVE, reviewer="ada")}
    )

    assert done.goto is None
    # Before, the conversation ended on the output tool's "Final result processed.", no answer shown.
    answer = json.loads(done.update["messages"][-1]["content"])
    assert answer == {
        "summary": "Refund of $42.50 issued for order ORD-1001 (refund R-1).",
        "follow_up": False,
    }
