"""OpenAI Agents SDK agents behind Gatehouse's inbox.

`OpenAIAgentsSDKAgent(name=..., agent=<sdk Agent>, gates={"issue_refund": Approval(...)})` runs
the agent one *segment* per step: `Runner.run` until it finishes or stops at tools that need
approval (`function_tool(needs_approval=True)`: the result has `interruptions`). Each segment is
a checkpoint; each call awaiting approval is a gate, so a request in the inbox. The step after
the decisions loads the stored `RunState` and resumes it: approve → `state.approve`, edit →
`state.approve` of the call rewritten with the reviewer's arguments, reject (or expiry) →
`state.reject` with the reason the model reads, respond → `state.reject` with the reviewer's
text in the tool's place. Those decisions are the only approvals the SDK sees: any it recorded
in a stored run state (an import, an old checkpoint) are dropped first, so a call awaiting
approval without a decision stops the run again, as a gate.

What a gate cannot cover is refused by `manage.py check` and by every segment before it runs
(`framework_errors`), in the agent and in every agent it runs: as a tool (`Agent.as_tool`), or
from a function tool's body or a guardrail (`Runner.run(other, ...)`). A model's tool call ids
are made ones a gate can key (`_DistinctCallIds`), as native agents' are.

State: the SDK's serialized `RunState` while a run waits (`RunState.to_json`, with a format
marker), the SDK's input items once it finished (`to_input_list()`, what the next prompt is sent
after), and the conversation in the chat shape the pages show.

Import the SDK from `agents.adapters.openai_sdk` (its package is named `agents`, like this app).
A model named by a string (`Agent(model="gpt-4o-mini")`, or none) is called through Chat
Completions at OPENAI_BASE_URL, with a client built for the segment's own event loop.

What runs again after a crash: a step is retried from its checkpoint, so the segment's model
calls and its tools that need no approval run again; a tool that needs approval runs at most
once per call if it wraps its side effect in `ctx.context.run_once(ctx.tool_call_id, fn)`. A
tool's database error (or an effect a cancel withdrew) is raised after the SDK's run, so the step
rolls back and retries, although the SDK has handed it to the model as text; other tool errors
reach the model as the SDK's users expect.
"""

import asyncio
import importlib
import json
from collections.abc import Callable
from typing import Any

import openai
import pydantic
from django.conf import settings

from agents import llm
from agents.adapters.base import (
    NODE,
    ClosingThreads,
    GatedToolsAgent,
    GatehouseDeps,
    RuntimeErrors,
    SegmentState,
    dropped_fields,
    edited_calls,
    objects_used_by,
)
from agents.adapters.openai_sdk import NAME, ModelProvider, OpenAIChatCompletionsModel, function_schema, sdk
from agents.gates import HumanDecision
from agents.graph import Gate, Step, StepContext
from agents.messages import distinct_call_ids
from agents.prebuilt import rejection_text
from agents.state import new_message_id
from agents.tools import Decision, ToolArgumentsError, plain_errors, unstorable_arguments

DEFAULT_MAX_TURNS: int = importlib.import_module(f"{NAME}.run_config").DEFAULT_MAX_TURNS  # Runner.run's
STATE_FORMAT = "openai-agents/0.24"  # run_state: RunState.to_json; history: to_input_list()
_WRAPPED = "__agents_function_tool_wrapped_callable__"  # where function_tool keeps the function


class OpenAIAgentsState(SegmentState):
    run_state: dict[str, Any] | None = None
    """The SDK's `RunState.to_json()` while the run waits for approvals; None once it finished."""
    history: list[dict[str, Any]] = []
    """The SDK's input items of the finished runs (`to_input_list()`): the next prompt follows them."""
    state_format: str = STATE_FORMAT


class _ChatCompletions(ModelProvider):
    """Models named by a string, through Chat Completions at OPENAI_BASE_URL (the offline model
    serves nothing else), on a client of the segment's event loop: an async client's
    connections belong to the loop that opened them."""

    def __init__(self) -> None:
        self.client = openai.AsyncOpenAI(
            base_url=settings.OPENAI_BASE_URL,
            api_key=settings.OPENAI_API_KEY or "offline",
            timeout=settings.OPENAI_TIMEOUT_S,
            max_retries=1,  # retries are the task's job, as for native agents
        )

    def get_model(self, model_name: str | None) -> Any:
        return _DistinctCallIds(model=model_name or settings.OPENAI_MODEL, openai_client=self.client)


class _DistinctCallIds(OpenAIChatCompletionsModel):
    """Chat Completions whose every response Gatehouse can store and key, before the SDK reads
    it, as native agents' replies are (llm.reply_from): its text with lone surrogates replaced,
    and function calls with ids a gate can key (`distinct_call_ids`): the SDK matches results
    and approvals to calls by id, and refuses an empty one or one used twice in a run."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        response = await super().get_response(system_instructions, input, *args, **kwargs)
        before = input if isinstance(input, list) else []
        used = {_field(item, "call_id") for item in before if _field(item, "type") == "function_call"}
        calls = [item for item in response.output if _field(item, "type") == "function_call"]
        ids = distinct_call_ids([call.call_id for call in calls], used=used)
        renamed = {id(call): new for call, new in zip(calls, ids, strict=True)}
        response.output = [
            _storable_item(item, call_id=renamed.get(id(item), "")) for item in response.output
        ]
        return response


class UnstorableArguments(RuntimeError):
    """A model's call whose arguments hold what no column can store (a lone surrogate): the SDK
    cannot take them (it fails hashing them) nor refuse them before a gated call's approval."""


def _storable_item(item: Any, *, call_id: str) -> Any:
    """An output item of a model response with text a checkpoint can hold."""
    kind = _field(item, "type")
    if kind == "message":
        content = [
            part.model_copy(update={"text": llm.storable(part.text)})
            if isinstance(getattr(part, "text", None), str) and llm.storable(part.text) != part.text
            else part
            for part in item.content
        ]
        changed = any(new is not old for new, old in zip(content, item.content, strict=True))
        return item.model_copy(update={"content": content}) if changed else item
    if kind != "function_call":
        return item
    stored = llm.storable_call(llm.ToolCall(id=call_id, name=item.name, arguments=item.arguments))
    if problem := unstorable_arguments(stored.arguments):
        # Said here rather than as the SDK's UnicodeEncodeError; the native agents' tools
        # refuse such arguments to the model, which the SDK has no place for.
        raise UnstorableArguments(
            f"{problem}, in the model's call of {stored.name!r}: the OpenAI Agents SDK has no way to "
            "refuse them to the model (it asks for a gated call's approval before reading them)"
        )
    if (stored.id, stored.name, stored.arguments) == (item.call_id, item.name, item.arguments):
        return item
    return item.model_copy(update={"call_id": stored.id, "name": stored.name, "arguments": stored.arguments})


def _field(item: Any, name: str) -> Any:
    """A field of an SDK item, a dict (input) or a model (output)."""
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


class OpenAIAgentsSDKAgent(GatedToolsAgent):
    """An OpenAI Agents SDK agent as a Gatehouse agent; `gates` names the tools that need approval
    (declare them `function_tool(needs_approval=True)`) with their queue, decisions and description."""

    state_type = OpenAIAgentsState

    def __init__(
        self,
        *,
        max_turns: int | None = DEFAULT_MAX_TURNS,
        context: Callable[[GatehouseDeps], Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """`max_turns` is `Runner.run`'s (None: no limit), for every segment of a run: a run
        resumed after its approvals keeps counting its turns. `context` builds the run's context
        (the tools' `ctx.context`) from the step's GatehouseDeps (your own context object,
        holding it for `run_once`); without it the context is the GatehouseDeps itself."""
        super().__init__(**kwargs)
        self.max_turns = max_turns
        self.context = context

    edit_note = (
        "An OpenAI Agents SDK thread: the SDK's run state and input items are what the model "
        "reads and cannot be edited here; the conversation shown is drawn from them. Decide a "
        "call awaiting approval in the inbox (edit changes its arguments)."
    )
    state_editable = False  # its state page is read-only; the API refuses a change (edit_errors)

    # The gate protocol: its edit form, and how an edit is checked.
    def _tool(self, action: str) -> Any:
        return next((t for t in self.agent.tools if getattr(t, "name", None) == action), None)

    def edit_schema(self, action: str) -> dict[str, Any]:
        tool = self._tool(action)
        return dict(tool.params_json_schema) if tool is not None else {}

    def validate_edit(self, action: str, args: Any) -> dict[str, Any]:
        model = _arguments_model(self._tool(action))
        if model is None:
            raise ToolArgumentsError(action, {"__all__": f"the tool {action!r} no longer exists"})
        try:
            validated = model.model_validate(args if args is not None else {})
        except pydantic.ValidationError as exc:
            raise ToolArgumentsError(action, plain_errors(None, exc)) from exc
        if dropped := dropped_fields(args, validated.model_dump(mode="json", by_alias=True)):
            raise ToolArgumentsError(action, dropped)
        return validated.model_dump(mode="json")

    def definition_errors(self) -> list[str]:
        return super().definition_errors() + self.framework_errors()

    def framework_errors(self) -> list[str]:
        """What in the SDK agent a gate cannot cover: refused by `manage.py check`, and again by
        every segment before it runs (a worker runs no system checks), so no call that needs a
        person's approval, or reaches a tool that should, ever runs without one."""
        errors = []
        for action in self.gates:
            tool = self._tool(action)
            if tool is None:
                errors.append(f"gate {action!r} names no tool of the OpenAI Agents SDK agent")
            elif tool.needs_approval is not True:
                errors.append(f"tool {action!r} is gated here: declare it function_tool(needs_approval=True)")
            elif _arguments_model(tool) is None:
                errors.append(f"tool {action!r}: declare it with function_tool, so edits are checked")
        names = [getattr(tool, "name", None) for tool in self.agent.tools]
        for name in sorted({n for n in names if n is not None and names.count(n) > 1}):
            # The SDK calls the last tool of a name; the gate would be checked on the first.
            errors.append(f"tool name {name!r} is used twice: give each tool its own name")
        for tool in self.agent.tools:
            if getattr(tool, "needs_approval", False) is not False and tool.name not in self.gates:
                errors.append(f"tool {tool.name!r} needs approval: name it in gates, with its queue")
        if self.max_turns is not None and not (isinstance(self.max_turns, int) and self.max_turns > 0):
            errors.append(f"max_turns is {self.max_turns!r}: give a number of turns over 0, or None")
        for where, agent in _agents_run(self.agent):
            errors += _unsupported(agent, where=where)
            errors += [
                f"{where}its tool {tool.name!r} is gated here but not there, so it would run unasked: "
                "give that tool to this agent only"
                for tool in (agent.tools if where else [])
                if getattr(tool, "name", None) in self.gates
                and getattr(tool, "needs_approval", False) is False
            ]
        for runner, inner, gated in _gated_in_agent_tools(self.agent):
            errors.append(
                f"{runner} runs agent {inner!r}, whose tool {gated!r} needs approval: a call "
                "inside an agent used as a tool cannot be gated; give that tool to this agent"
            )
        return errors

    def edit_errors(self, *, before: dict[str, Any], after: dict[str, Any]) -> dict[str, str]:
        """Only the SDK's state is what the model reads, and it is not edited here (see edit_note)."""
        stored = self.state.model_validate(before).model_dump(mode="json")
        return {
            field: "the SDK's run is not edited here: decide its calls in the inbox"
            for field in ("run_state", "history", "state_format", "messages")
            if after[field] != stored[field]
        }

    def import_problem(self, values: dict[str, Any], *, exported_from: str) -> str:
        """Why an imported state cannot stand ("" if it can): every copy of a call in the SDK's
        run state must be the same call, once, so what a reviewer approves is what runs."""
        state: Any = self.state.model_validate(values)
        if state.state_format != STATE_FORMAT:
            return f"state_format is {state.state_format!r}; this version reads {STATE_FORMAT!r}"
        calls: dict[Any, dict[str, Any]] = {}
        for call in _function_calls(state.run_state):
            seen = calls.setdefault(call.get("call_id"), call)
            if (seen.get("name"), _arguments(seen)) != (call.get("name"), _arguments(call)):
                return f"run_state: its copies of call {call.get('call_id')} differ in tool or arguments"
        keys = [gate.key for gate in self.pending_gates(state, NODE)]
        if len(keys) != len(set(keys)):
            return "run_state: a call awaits approval twice"
        return ""

    def pending_gates(self, state: Any, next_node: str) -> list[Gate]:
        """The gated calls the stored run waits on."""
        if next_node != NODE or not state.run_state:
            return []
        step = state.run_state.get("current_step") or {}
        if step.get("type") != "next_step_interruption":
            return []
        return self._gates([i["raw_item"] for i in step["data"]["interruptions"]])

    def _gates(self, calls: list[Any]) -> list[Gate]:
        dumped = [call if isinstance(call, dict) else call.model_dump() for call in calls]
        return [
            self.gate(key=call["call_id"], action=call["name"], args=json.loads(call["arguments"] or "{}"))
            for call in dumped
            if call.get("type") == "function_call" and call["name"] in self.gates
        ]

    def run_segment(self, state: Any, ctx: StepContext) -> Step:
        """Run the agent until it finishes or waits for approvals: one checkpoint."""
        if problems := self.framework_errors():  # registered although `manage.py check` says no
            raise RuntimeError(f"agent {self.name!r} cannot run: {'; '.join(problems)}")
        if state.state_format != STATE_FORMAT:
            raise ValueError(f"state is {state.state_format!r}; this version reads {STATE_FORMAT!r}")
        errors = RuntimeErrors()
        deps = errors.watching(GatehouseDeps.of(ctx))
        context = self.context(deps) if self.context is not None else deps
        try:
            result, run_state = _in_a_fresh_loop(self._run(state, context, ctx.decisions, errors))
        except llm.TRANSIENT as exc:  # 5xx, 429, no connection: the step may be retried
            raise llm.ModelUnavailable(f"model unavailable: {exc}") from exc
        shown = _items_shown(state.run_state)  # a resumed run's new_items repeat the stored ones
        update: dict[str, Any] = {
            "messages": [*edited_calls(state.messages, ctx.decisions), *_chat(result.new_items[shown:])],
            "prompt": "",
            "run_state": run_state,
        }
        meta = {"model": _model_name(result), "offline": llm.is_offline()}
        if result.interruptions:
            gates = self._gates([item.raw_item for item in result.interruptions])
            if len(gates) != len(result.interruptions):
                raise RuntimeError("the run waits on calls no gate asks about; name their tools in gates")
            return Step(update=update, goto=NODE, gates=gates, resumed=bool(ctx.decisions), metadata=meta)
        update["history"] = result.to_input_list()
        return Step(update=update, goto=None, resumed=bool(ctx.decisions), metadata=meta)

    async def _run(
        self, state: Any, context: Any, decisions: dict[str, HumanDecision], errors: RuntimeErrors
    ) -> tuple[Any, dict[str, Any] | None]:
        provider = _ChatCompletions()
        config = sdk.RunConfig(
            model_provider=provider,
            model_settings=sdk.ModelSettings(extra_headers=llm.offline_headers()),
            tracing_disabled=True,
            tool_error_formatter=lambda failed: errors.keep(failed.error),  # None: the SDK's text
        )
        try:
            if state.run_state:
                todo = await self._resumed(state.run_state, context, decisions)
            else:
                todo = [
                    *state.history,
                    *([{"role": "user", "content": state.prompt}] if state.prompt else []),
                ]
            result = await sdk.Runner.run(
                self.agent, todo, context=context, run_config=config, max_turns=self.max_turns
            )
            waiting = (
                result.to_state().to_json(context_serializer=_no_context) if result.interruptions else None
            )
        finally:
            await provider.client.close()
            # The SDK gave the model a tool's database error (or withdrawn effect) as its result:
            # raised instead, so the step rolls back and retries (or is stale), as a native one.
            errors.raise_kept()
        return result, waiting

    async def _resumed(
        self, stored: dict[str, Any], context: Any, decisions: dict[str, HumanDecision]
    ) -> Any:
        """The stored run with the reviewers' decisions applied, and only theirs."""
        stored = _without_approvals(stored)
        for key, decision in decisions.items():
            if decision.kind == Decision.EDIT:  # approved as edited: see _edited
                stored = _edited(stored, call_id=key, args=decision.args or {})
        run_state = await sdk.RunState.from_json(
            self.agent, stored, context_override=sdk.RunContextWrapper(context=context)
        )
        # A stored state is a document anyone with an import or an old checkpoint may have
        # written: the SDK runs a call it finds approved there, so only Gatehouse's decisions count.
        run_state._context._approvals.clear()
        run_state._max_turns = self.max_turns  # the agent's limit, not one a stored state sets
        for item in run_state.get_interruptions():
            decided = decisions.get(item.raw_item.call_id)
            if decided is None:
                continue  # still waiting: the run stops at it again
            if decided.kind in (Decision.APPROVE, Decision.EDIT):
                run_state.approve(item)
            elif decided.kind == Decision.RESPOND:
                run_state.reject(item, rejection_message=decided.message)
            else:
                run_state.reject(item, rejection_message=rejection_text(decided))
        return run_state


def _agents_run(agent: Any) -> list[tuple[str, Any]]:
    """(how it is reached, the agent) for `agent` and every agent it runs as a tool, nested."""
    found: list[tuple[str, Any]] = [("", agent)]
    seen = {id(agent)}
    for where, outer in found:
        for runner, inner in _inner_agents(outer):
            if id(inner) not in seen:
                seen.add(id(inner))
                found.append((f"{where}{runner} runs agent {inner.name!r}: ", inner))
    return found


def _inner_agents(agent: Any) -> list[tuple[str, Any]]:
    """(what runs it, agent) for each agent `agent` runs beside its own turns: an agent used as
    a tool (`Agent.as_tool`), or one that a function tool's body or a guardrail function runs
    (`Runner.run(other, ...)`)."""
    found = []
    for tool in agent.tools:
        if getattr(tool, "_is_agent_tool", False):
            inner = getattr(tool, "_agent_instance", None)
            found += [(f"tool {tool.name!r}", inner)] if inner is not None else []
            continue
        guardrails = [
            *(getattr(tool, "tool_input_guardrails", None) or []),
            *(getattr(tool, "tool_output_guardrails", None) or []),
        ]
        runners = [_function_of(tool), *(g.guardrail_function for g in guardrails)]
        found += [
            (f"tool {tool.name!r}", inner)
            for function in runners
            if function is not None
            for inner in objects_used_by(function, kind=sdk.Agent)
        ]
    for guardrail in [*agent.input_guardrails, *agent.output_guardrails]:
        label = f"guardrail {guardrail.get_name()!r}"
        found += [(label, inner) for inner in objects_used_by(guardrail.guardrail_function, kind=sdk.Agent)]
    return found


def _unsupported(agent: Any, *, where: str) -> list[str]:
    """What of `agent` a segment cannot run through its gates: each would run another agent's
    tools, or tools Gatehouse does not see (nor gate), or fail at the first model call."""
    errors = []
    if not (agent.model is None or isinstance(agent.model, str)):
        # Its client was built for one event loop; each segment runs on a loop of its own.
        errors.append(
            f"{where}model is a {type(agent.model).__name__} object: name the model (a string), "
            "called through Chat Completions at OPENAI_BASE_URL"
        )
    if agent.handoffs:
        # The agent handed to runs its own tools: a side effect there would pass no gate.
        errors.append(f"{where}handoffs are not supported: a segment runs one agent")
    if agent.mcp_servers:
        # Their tools (and any require_approval) are listed only at run time, no gate names
        # them, and their connections would belong to another event loop than the segment's.
        names = ", ".join(repr(getattr(s, "name", type(s).__name__)) for s in agent.mcp_servers)
        errors.append(
            f"{where}MCP servers are not supported ({names}): their tools cannot be gated; "
            "wrap the calls you need in function tools"
        )
    for tool in agent.tools:
        if not isinstance(tool, sdk.FunctionTool):
            # Hosted tools (web search, hosted MCP with its on_approval_request, code interpreter)
            # and local shell, computer or patch tools: not Chat Completions tools, never gated.
            errors.append(
                f"{where}tool {getattr(tool, 'name', type(tool).__name__)!r} is a "
                f"{type(tool).__name__}: only function tools are supported"
            )
    return errors


def _gated_in_agent_tools(agent: Any, seen: frozenset[int] = frozenset()) -> list[tuple[str, str, str]]:
    """(tool, its agent, that agent's tool) for each tool needing approval inside an agent a tool
    runs (`Agent.as_tool`, or `Runner.run` in a function tool's body), nested ones included: the
    SDK stops that agent's run at them, but their calls are no tool of this agent."""
    found = []
    for runner, inner in _inner_agents(agent):
        if id(inner) in seen:
            continue
        found += [
            (runner, inner.name, t.name)
            for t in inner.tools
            if getattr(t, "needs_approval", False) is not False
        ]
        deeper = _gated_in_agent_tools(inner, seen | {id(agent), id(inner)})
        found += [(runner, inner_agent, gated) for _, inner_agent, gated in deeper]
    return found


_APPROVAL_RECORDS = ("approvals", "hosted_mcp_approvals", "function_tool_approvals")


def _without_approvals(value: Any) -> Any:
    """`value` (a stored RunState, nested runs included) with every approval the SDK records
    emptied: its calls are decided in Gatehouse's inbox, never by what a state carries."""

    def emptied(node: dict[str, Any]) -> dict[str, Any]:
        context = node.get("context")
        if not (isinstance(context, dict) and any(k in context for k in _APPROVAL_RECORDS)):
            return node  # not a RunState's
        empty: dict[str, Any] = {
            k: ({} if k == "approvals" else []) for k in _APPROVAL_RECORDS if k in context
        }
        return {**node, "context": {**context, **empty}}

    return _map_objects(value, emptied)


def _map_objects(value: Any, rewrite: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """`value` (JSON) with every object rewritten, innermost first."""
    if isinstance(value, list):
        return [_map_objects(v, rewrite) for v in value]
    if not isinstance(value, dict):
        return value
    return rewrite({k: _map_objects(v, rewrite) for k, v in value.items()})


def _items_shown(run_state: dict[str, Any] | None) -> int:
    """How many of the stored run's items the pages show already (all but its approval requests)."""
    items = (run_state or {}).get("generated_items") or []
    return sum(1 for item in items if item.get("type") != "tool_approval_item")


def _no_context(context: Any) -> dict[str, Any]:
    """The run's context (GatehouseDeps, or what `context` built from it) is the step's, never
    stored: each step passes its own."""
    return {}


def _in_a_fresh_loop(coro: Any) -> Any:
    """Run `coro` on a loop of its own (a worker runs steps in threads, none with a loop), its
    sync tools in threads that close their database connections."""
    with asyncio.Runner() as runner:
        runner.get_loop().set_default_executor(
            ClosingThreads(max_workers=4, thread_name_prefix="openai-agents-tool")
        )
        return runner.run(coro)


def _function_of(tool: Any) -> Any:
    """The function a function_tool calls (None for other tools)."""
    invoker = getattr(tool, "on_invoke_tool", None)
    function = getattr(getattr(invoker, "_invoke_tool_impl", invoker), _WRAPPED, None)
    return function if callable(function) else None


def _arguments_model(tool: Any) -> type[pydantic.BaseModel] | None:
    """The pydantic model of a function_tool's arguments (the SDK keeps only the function)."""
    function = _function_of(tool)
    if function is None:
        return None
    model: type[pydantic.BaseModel] = function_schema(function).params_pydantic_model
    # The SDK's model ignores unknown keys: an edit naming an argument the tool lacks is refused
    # (400), as for every other agent, rather than approved with it silently dropped.
    strict: type[pydantic.BaseModel] = type(
        model.__name__,
        (model,),
        {"model_config": pydantic.ConfigDict(extra="forbid"), "__module__": model.__module__},
    )
    return strict


def _edited(stored: dict[str, Any], *, call_id: str, args: dict[str, Any]) -> dict[str, Any]:
    """The stored run with its pending call `call_id` carrying `args`. The SDK binds an approval
    to the call's fingerprint (its arguments' digest, in `context.tool_invocations`) and has no
    way to approve other arguments; so every copy of the call is rewritten and its record, of a
    call not yet run, dropped: the SDK records the call afresh, as edited, when it is approved."""
    invocations = stored["context"].get("tool_invocations") or {}
    record = invocations.get(call_id) or {}
    if record.get("executed") or record.get("completed"):
        raise ValueError(f"call {call_id} already ran: its arguments cannot be edited")
    rewritten: dict[str, Any] = _with_arguments(stored, call_id=call_id, args=args)
    rewritten["context"]["tool_invocations"] = {k: v for k, v in invocations.items() if k != call_id}
    return rewritten


def _function_calls(value: Any) -> list[dict[str, Any]]:
    """Every stored function call in `value` (a RunState's JSON), copies included."""
    if isinstance(value, list):
        return [call for v in value for call in _function_calls(v)]
    if not isinstance(value, dict):
        return []
    nested = [call for v in value.values() for call in _function_calls(v)]
    return [value, *nested] if value.get("type") == "function_call" and "call_id" in value else nested


def _arguments(call: dict[str, Any]) -> Any:
    try:
        return json.loads(call.get("arguments") or "{}")
    except (TypeError, ValueError):
        return call.get("arguments")


def _with_arguments(value: Any, *, call_id: str, args: dict[str, Any]) -> Any:
    """`value` with every stored function call `call_id` carrying `args`."""

    def rewritten(node: dict[str, Any]) -> dict[str, Any]:
        if node.get("type") == "function_call" and node.get("call_id") == call_id and "arguments" in node:
            return {**node, "arguments": json.dumps(args)}
        return node

    return _map_objects(value, rewritten)


def _chat(items: list[Any]) -> list[dict[str, Any]]:
    """The SDK's new run items in the chat shape the pages show: a model response's text and its
    calls in one assistant message, then each call's result."""
    shown: list[dict[str, Any]] = []
    response: dict[str, Any] | None = None  # the assistant message the next calls belong to
    for item in items:
        if item.type == "message_output_item":
            response = {
                "id": new_message_id(),
                "role": "assistant",
                "content": sdk.ItemHelpers.text_message_output(item) or None,
            }
            shown.append(response)
        elif item.type == "tool_call_item" and getattr(item.raw_item, "type", None) == "function_call":
            call = {
                "id": item.raw_item.call_id,
                "type": "function",
                "function": {"name": item.raw_item.name, "arguments": item.raw_item.arguments},
            }
            if response is None:
                response = {"id": new_message_id(), "role": "assistant", "content": None}
                shown.append(response)
            response.setdefault("tool_calls", []).append(call)
        elif item.type == "tool_call_output_item":
            raw = item.raw_item if isinstance(item.raw_item, dict) else item.raw_item.model_dump()
            output = item.output if isinstance(item.output, str) else json.dumps(item.output, default=str)
            shown.append(
                {
                    "id": new_message_id(),
                    "role": "tool",
                    "tool_call_id": raw.get("call_id"),
                    "content": output,
                }
            )
            response = None
    return shown


def _model_name(result: Any) -> str:
    for response in reversed(result.raw_responses):
        for output in response.output:
            model = (getattr(output, "provider_data", None) or {}).get("model")
            if model:
                return str(model)
    return ""
