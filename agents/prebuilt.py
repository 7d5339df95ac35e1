"""The prebuilt tool-calling loop: model -> tools -> model ... until the model stops calling tools."""

import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError

from agents import llm
from agents.gates import HumanDecision
from agents.graph import Agent, Gate, Step, StepContext
from agents.messages import message_errors
from agents.state import State, new_message_id
from agents.tools import Approval, Decision, Expiry, Tool, ToolArgumentsError, ToolContext

REJECTED_PREFIX = "Rejected by a human reviewer: "
EXPIRED_PREFIX = "Rejected automatically, no reviewer decided in time: "
POLICY_PREFIX = "Rejected automatically by policy {policy}: "
"""What the model reads for a rejected call: a person's reason, or a gate's expiry reason."""
TOOL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$")
QUEUE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


@dataclass(eq=False)
class ToolAgent(Agent):
    """An agent that calls the model with its tools and runs (or gates) the calls it makes."""

    system_prompt: str = ""
    tools: list[Tool] = field(default_factory=list)
    nodes: dict[str, Any] = field(default_factory=dict)
    start: str = "model"

    def __post_init__(self) -> None:
        self.nodes = {"model": self.call_model, "tools": self.run_tools}
        self._tools = {t.name: t for t in self.tools if isinstance(t, Tool)}

    def tool(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def definition_errors(self) -> list[str]:
        return super().definition_errors() + tool_agent_errors(self)

    def approval_for(self, action: str) -> Approval | None:
        tool = self.tool(action)
        return tool.approval if tool else None

    def approvals(self) -> list[Approval]:
        return [t.approval for t in self._tools.values() if t.approval is not None]

    def gated_actions(self) -> frozenset[str]:
        return frozenset(name for name, t in self._tools.items() if t.approval is not None)

    def edit_schema(self, action: str) -> dict[str, Any]:
        tool = self.tool(action)
        return tool.args_schema() if tool else {}

    def validate_edit(self, action: str, args: Any) -> dict[str, Any]:
        tool = self.tool(action)
        if tool is None:
            raise ToolArgumentsError(action, {"__all__": f"the tool {action!r} no longer exists"})
        return tool.validate_args(args if args is not None else {})

    def side_effects_after(self, *, origin: dict[str, Any], head: dict[str, Any]) -> list[dict[str, Any]]:
        ran_before = {m.get("tool_call_id") for m in origin.get("messages", []) if m.get("role") == "tool"}
        messages = head.get("messages", [])
        calls = {c["id"]: c["function"] for m in messages for c in m.get("tool_calls") or []}
        return [
            {
                "key": m["tool_call_id"],  # a gate's key is its call's id (_gates)
                "tool": calls[m["tool_call_id"]]["name"],
                "arguments": calls[m["tool_call_id"]].get("arguments", ""),
                "result": m.get("content", ""),
            }
            for m in messages
            if m.get("role") == "tool"
            and m.get("tool_call_id") not in ran_before
            and m.get("tool_call_id") in calls
            and self.approval_for(calls[m["tool_call_id"]]["name"]) is not None
        ]

    def state_errors(self, values: dict[str, Any]) -> dict[str, str]:
        return message_errors(values.get("messages", []))

    def call_model(self, state: State, ctx: StepContext) -> Step:
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        reply = llm.complete(
            messages=[*messages, *state.messages],  # type: ignore[attr-defined]
            tools=[t.openai_schema() for t in self.tools],
        )
        message = llm.assistant_message(reply, message_id=new_message_id())
        meta = {"model": reply.model, "offline": llm.is_offline()}
        if not reply.tool_calls:
            return Step(update={"messages": [message]}, goto=None, metadata=meta)
        return Step(
            update={"messages": [message]}, goto="tools", gates=self._gates(reply.tool_calls), metadata=meta
        )

    def pending_gates(self, state: Any, next_node: str) -> list[Gate]:
        messages = getattr(state, "messages", [])
        if next_node != "tools" or not messages:
            return []
        calls = messages[-1].get("tool_calls") or []
        return self._gates([llm.ToolCall.of(c) for c in calls])

    def _gates(self, calls: list[llm.ToolCall]) -> list[Gate]:
        gates = []
        for call in calls:
            tool = self.tool(call.name)
            if tool is None or tool.approval is None:
                continue
            proposed = llm.parse_arguments(call.arguments)
            try:
                # As the tool will read them: a policy judges `"600000"` as the number it is.
                args = tool.validate_args(proposed if isinstance(proposed, dict) else {"__raw__": proposed})
            except ToolArgumentsError:
                continue  # no reviewer is asked about a call its own tool refuses; run_tools says why
            gates.append(
                Gate(
                    key=call.id,
                    action=tool.name,
                    args=args,
                    approval=tool.approval,
                    description=tool.approval.describe(args),
                )
            )
        return gates

    def run_tools(self, state: State, ctx: StepContext) -> Step:
        """Run the last assistant message's tool calls, applying human decisions to gated ones."""
        call_message = dict(state.messages[-1])  # type: ignore[attr-defined]
        calls = [dict(c) for c in call_message.get("tool_calls") or []]
        results = []
        for call in calls:
            content, edited_args = self._run_call(call, ctx)
            if edited_args is not None:
                call["function"] = {**call["function"], "arguments": json.dumps(edited_args)}
                call["edited"] = True
            results.append(
                {"id": new_message_id(), "role": "tool", "tool_call_id": call["id"], "content": content}
            )
        if any(c.get("edited") for c in calls):
            # Rewrite the call the model sees in its history (same id: replaced in place).
            call_message["tool_calls"] = calls
            results.insert(0, call_message)
        return Step(update={"messages": results}, goto="model", resumed=bool(ctx.decisions))

    def _run_call(self, call: dict[str, Any], ctx: StepContext) -> tuple[str, dict[str, Any] | None]:
        """Return the tool message content, and the edited arguments if a reviewer changed them."""
        name, raw_args = call["function"]["name"], call["function"].get("arguments") or "{}"
        tool = self.tool(name)
        if tool is None:
            return f"Error: there is no tool named {name!r}.", None
        args, edited = llm.parse_arguments(raw_args), None
        if tool.approval is not None:
            decision = ctx.decisions.get(call["id"])
            if decision is None and (error := _invalid(tool, args)):
                return f"Error: {error}", None
            if decision is None:
                raise RuntimeError(f"tool call {call['id']} ran without a decision")
            if decision.kind == Decision.REJECT:
                return rejection_text(decision), None
            if decision.kind == Decision.RESPOND:
                return decision.message, None
            if decision.kind == Decision.EDIT:
                args = edited = decision.args
        context = ToolContext(
            thread_id=ctx.thread_id, checkpoint_id=ctx.checkpoint_id, tool_call_id=call["id"]
        )
        result = ctx.run_once(call["id"], lambda: _invoke(tool, args, context))
        return result, edited


def rejection_text(decision: HumanDecision) -> str:
    """What the model reads in place of a rejected call's result: who rejected it, and why."""
    prefix = EXPIRED_PREFIX if decision.expired else REJECTED_PREFIX
    if decision.policy:
        prefix = POLICY_PREFIX.format(policy=decision.policy)
    return prefix + (decision.message or "no reason given")


def _invalid(tool: Tool, args: Any) -> str:
    """Why the tool refuses these arguments ("" when they are valid)."""
    try:
        tool.validate_args(args)
    except ToolArgumentsError as exc:
        return str(exc)
    return ""


def _invoke(tool: Tool, args: Any, context: ToolContext) -> str:
    """Run a tool; its own errors become the result so the model can see them and go on."""
    try:
        value = tool.invoke(args, context=context)
        # A value JSON cannot hold (a datetime, a Decimal) is written as its text.
        return value if isinstance(value, str) else json.dumps(value, default=str)
    except ToolArgumentsError as exc:
        return f"Error: {exc}"
    except DatabaseError:
        # A lock timeout, deadlock or serialization failure is the database's, not the tool's:
        # the transaction is broken and the side effect rolled back, so the step must retry.
        raise
    except Exception as exc:
        return f"Error: {tool.name} failed: {type(exc).__name__}: {exc}"


def approval_errors(approval: Approval, *, where: str) -> list[str]:
    """What is wrong with an approval an agent declares (shared by every kind of agent)."""
    errors = []
    if not QUEUE_NAME.match(approval.queue):
        errors.append(f"{where}: queue {approval.queue!r} must match {QUEUE_NAME.pattern}")
    if not approval.decisions:
        errors.append(f"{where}: an approval must allow at least one decision")
    if isinstance(approval.decisions, str):
        errors.append(f"{where}: decisions must be a tuple of decisions, e.g. (Decision.APPROVE,)")
    else:
        errors += [f"{where}: unknown decision {d!r}" for d in approval.decisions if d not in Decision.values]
    if approval.expiry is not None and not isinstance(approval.expiry, Expiry):
        errors.append(f"{where}: expiry must be an Expiry(...), got {approval.expiry!r}")
    return errors


def tool_agent_errors(agent: ToolAgent) -> list[str]:
    errors = []
    names = [t.name for t in agent.tools if isinstance(t, Tool)]
    errors += [f"tool {n!r} is registered twice" for n in set(names) if names.count(n) > 1]
    for t in agent.tools:
        if not isinstance(t, Tool):
            errors.append(f"{t!r} is not a Tool; decorate the function with @tool")
            continue
        if not TOOL_NAME.match(t.name):
            errors.append(f"tool name {t.name!r} must match {TOOL_NAME.pattern}")
        if t.approval:
            errors += approval_errors(t.approval, where=f"tool {t.name!r}")
    is_state = isinstance(agent.state, type) and issubclass(agent.state, State)
    if is_state and "messages" not in agent.state.model_fields:
        errors.append("a ToolAgent's state needs a 'messages' field")
    return errors
