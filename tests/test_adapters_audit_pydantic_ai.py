"""Audit, as an engineer porting a pydantic-ai agent: what its `agent.run(...)` call carried — its
own deps and its UsageLimits — is carried by PydanticAIAgent too, through pydantic-ai's real
classes against the offline model, over HTTP (its refunds script: lookup_order, then
issue_refund, then the report: three model requests, the gate after the second)."""

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_ai import RunContext
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.usage import UsageLimits

from agents.adapters.pydanticai import GatehouseDeps, PydanticAIAgent
from agents.gates import HumanDecision
from agents.tools import Approval, Decision
from tests.segments import check_problems, run
from tests.test_adapters_audit_safety import pydantic_refunds
from tests.test_pydantic_ai_features import then

pytestmark = pytest.mark.django_db(transaction=True)

APPROVAL = Approval(queue="refunds", decisions=(Decision.APPROVE, Decision.REJECT))


def refunds(url: str, issued: list[Any], **options: Any) -> Any:
    support = pydantic_refunds(url, **options)

    @support.tool_plain(requires_approval=True)
    def issue_refund(order_id: str, amount_cents: int) -> str:
        issued.append((order_id, amount_cents))
        return json.dumps({"status": "issued", "amount_cents": amount_cents})

    return support


def approve(agent: PydanticAIAgent, state: Any, waiting: Any) -> Any:
    [gate] = waiting.gates
    return run(
        agent, then(agent, state, waiting), {gate.key: HumanDecision(kind=Decision.APPROVE, reviewer="ada")}
    )


def test_usage_limits_bound_the_whole_run_across_its_approval(live_server_url: str) -> None:
    issued: list[Any] = []
    support = refunds(live_server_url, issued)
    limited = PydanticAIAgent(
        name="pai_limited",
        agent=support,
        gates={"issue_refund": APPROVAL},
        usage_limits=UsageLimits(request_limit=2),
    )
    state = limited.state.model_validate(limited.input_update("Please refund order ORD-1001"))
    waiting = run(limited, state)  # two requests: the lookup, the proposal

    # The third request, after the approval, is over the run's limit of two; before, the resumed
    # segment counted from zero (and no limit could be given at all).
    with pytest.raises(UsageLimitExceeded, match="request_limit of 2"):
        approve(limited, state, waiting)

    enough = PydanticAIAgent(
        name="pai_enough",
        agent=support,
        gates={"issue_refund": APPROVAL},
        usage_limits=UsageLimits(request_limit=3),
    )
    done = approve(enough, state, run(enough, state))
    assert done.goto is None and "Refund of $42.50 issued" in done.update["messages"][-1]["content"]

    strict = PydanticAIAgent(
        name="pai_strict",
        agent=support,
        gates={"issue_refund": APPROVAL},
        usage_limits=UsageLimits(request_limit=1),
    )
    with pytest.raises(UsageLimitExceeded, match="request_limit of 1"):
        run(strict, state)


@dataclass
class ShopDeps:
    """An agent's own deps, as pydantic-ai's docs write them: here holding Gatehouse's."""

    gatehouse: GatehouseDeps
    currency: str


def test_an_agents_own_deps_are_built_for_each_step_and_reach_its_tools(live_server_url: str) -> None:
    issued: list[Any] = []
    support = pydantic_refunds(live_server_url, deps_type=ShopDeps)

    @support.tool(requires_approval=True)
    def issue_refund(ctx: RunContext[ShopDeps], order_id: str, amount_cents: int) -> str:
        def issue() -> dict[str, Any]:
            issued.append((ctx.deps.gatehouse.thread_id, order_id, amount_cents, ctx.deps.currency))
            return {"status": "issued", "amount_cents": amount_cents}

        return json.dumps(ctx.deps.gatehouse.run_once(ctx.tool_call_id or "", issue))

    # Before, it registered; its tools were handed GatehouseDeps and failed reading `currency`.
    assert check_problems(
        PydanticAIAgent(name="pai_deps", agent=support, gates={"issue_refund": APPROVAL})
    ) == [
        "Agent 'pai_deps': the agent's deps_type is ShopDeps: give deps=, a function building its "
        "ShopDeps from the step's GatehouseDeps"
    ]

    agent = PydanticAIAgent(
        name="pai_deps",
        agent=support,
        gates={"issue_refund": APPROVAL},
        deps=lambda gatehouse: ShopDeps(gatehouse=gatehouse, currency="EUR"),
    )
    assert check_problems(agent) == []
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))
    done = approve(agent, state, run(agent, state))

    assert done.goto is None and issued == [("t", "ORD-1001", 4250, "EUR")]


def test_an_async_tool_that_blocks_the_shared_loop_is_logged_with_where_it_blocks(
    live_server_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_ai import Agent, DeferredToolRequests
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from agents.adapters import pydanticai

    monkeypatch.setattr(pydanticai, "STALL_S", 0.2)
    model = OpenAIChatModel(
        "offline", provider=OpenAIProvider(base_url=f"{live_server_url}/offline/v1", api_key="x")
    )
    support: Any = Agent(model, output_type=[str, DeferredToolRequests])

    @support.tool_plain
    async def lookup_order(order_id: str) -> dict[str, Any]:
        time.sleep(2)  # sync I/O inside async def: every step on the loop waits for it
        return {"order_id": order_id, "total_cents": 4250}

    @support.tool_plain(requires_approval=True)
    def issue_refund(order_id: str, amount_cents: int) -> str:
        return "issued"

    agent = PydanticAIAgent(name="pai_blocking", agent=support, gates={"issue_refund": APPROVAL})
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))

    with caplog.at_level(logging.WARNING, logger="agents.adapters.pydanticai"):
        assert [g.action for g in run(agent, state).gates] == ["issue_refund"]

    # Before, nothing said why every pydantic-ai step in the process stalled meanwhile.
    stalls = [r.getMessage() for r in caplog.records if "has not run for" in r.getMessage()]
    [stall] = [text for text in stalls if "in lookup_order" in text]  # (a loaded box may add others)
    assert "time.sleep(2)" in stall and "make it a plain def" in stall


def test_a_toolset_that_decides_approvals_itself_is_refused_at_check(live_server_url: str) -> None:
    from pydantic_ai.toolsets import FunctionToolset

    issued: list[Any] = []
    billing: FunctionToolset[Any] = FunctionToolset()

    @billing.tool_plain
    def issue_refund(order_id: str, amount_cents: int) -> str:
        issued.append((order_id, amount_cents))
        return "issued"

    support = pydantic_refunds(live_server_url, toolsets=[billing.approval_required()])
    agent = PydanticAIAgent(name="pai_toolset", agent=support, gates={})

    # Before, it registered; its first refund stopped the run for nobody, failing the step.
    assert check_problems(agent) == [
        "Agent 'pai_toolset': toolset 'ApprovalRequiredToolset(FunctionToolset)' decides approvals "
        "itself (approval_required): gate the agent's own tools, declared requires_approval=True, instead"
    ]
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))
    # A worker runs no system checks: the segment refuses it too, before anything runs.
    with pytest.raises(RuntimeError, match=r"cannot run: toolset .* decides approvals itself"):
        run(agent, state)
    assert issued == []
