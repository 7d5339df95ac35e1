"""pydantic-ai agents behind Gatehouse's inbox.

`PydanticAIAgent(name=..., agent=<pydantic_ai.Agent>, gates={"issue_refund": Approval(...)})`
runs the agent one *segment* per step: `agent.run`, on the process's one loop for them, until it
finishes or stops at tools that need approval (`requires_approval=True`: the run ends with
`DeferredToolRequests`). Each segment is a checkpoint; each call awaiting approval is a gate, so a
request in the inbox. The step after the decisions resumes the run with `DeferredToolResults`:
approve → `True`, edit → `ToolApproved(override_args=...)`, reject (or expiry) → `ToolDenied`
with the reason the model reads, respond → `ToolDenied` with the reviewer's text in the tool's place.

Nothing but a gate's reviewer approves a gated call: `GatesHold` runs one only if this step's
decisions approved it, and `manage.py check` (and every segment, before it runs) refuses what
would decide or run one elsewhere: approval toolsets, capabilities deciding deferred calls, an
output function that is a gated tool, and another agent a tool, output function or validator
runs (agent delegation) whose tools need approval or are a gated one. A model's tool call ids
are made ones a gate can key (`DistinctCallIds`), as native agents' are.

State: pydantic-ai's own message history (`ModelMessagesTypeAdapter` JSON, with a format
marker), appended per segment, and the conversation in the chat shape the pages show.

What runs again after a crash: a step is retried from its checkpoint, so the segment's model
calls and its tools that need no approval run again; a tool that needs approval runs at most
once per call if it wraps its side effect in `ctx.deps.run_once(ctx.tool_call_id, fn)`
(recorded with the step's checkpoint, like native tools).
"""

import asyncio
import json
import logging
import os
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable
from dataclasses import replace
from typing import Annotated, Any

import pydantic
import pydantic_ai
from pydantic_ai import (
    ApprovalRequired,
    DeferredToolRequests,
    DeferredToolResults,
    RunContext,
    ToolApproved,
    ToolDenied,
)
from pydantic_ai.capabilities import AbstractCapability, CombinedCapability, Hooks, WrapperCapability
from pydantic_ai.exceptions import ModelHTTPError, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import (
    AbstractToolset,
    ApprovalRequiredToolset,
    CombinedToolset,
    ExternalToolset,
    FunctionToolset,
)
from pydantic_ai.toolsets.wrapper import WrapperToolset
from pydantic_ai.usage import RunUsage, UsageLimits

from agents import llm
from agents.adapters.base import (
    NODE,
    ClosingThreads,
    GatedToolsAgent,
    GatehouseDeps,
    SegmentState,
    dropped_fields,
    edited_calls,
    objects_used_by,
)
from agents.gates import HumanDecision
from agents.graph import Gate, Step, StepContext
from agents.messages import distinct_call_ids
from agents.prebuilt import rejection_text
from agents.state import append, new_message_id
from agents.tools import Decision, ToolArgumentsError, plain_errors, unstorable_arguments

HISTORY_FORMAT = "pydantic-ai/1"  # the stored history's shape: ModelMessagesTypeAdapter's JSON


class PydanticAIState(SegmentState):
    history: Annotated[list[dict[str, Any]], append] = []
    """pydantic-ai's messages, as `ModelMessagesTypeAdapter` dumps them (HISTORY_FORMAT)."""
    history_format: str = HISTORY_FORMAT


logger = logging.getLogger(__name__)
STALL_S = 1.0
"""How long the segments' loop may go without running before the stall is logged."""

_tool_threads = ClosingThreads(max_workers=8, thread_name_prefix="pydantic-ai-tool")
_loop_lock = threading.Lock()
_loop: tuple[int, asyncio.AbstractEventLoop] | None = None  # (the process that started it, the loop)


def _segments_loop() -> asyncio.AbstractEventLoop:
    """The one event loop this process runs every pydantic-ai segment on. A model built the
    natural way, at import, keeps one async HTTP client whose connections belong to the loop
    that opened them: `run_sync` in each worker thread (a loop per thread) would share them
    across loops and fail ("bound to a different event loop")."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop[0] != os.getpid():  # a forked child has the loop but not its thread
            loop = asyncio.new_event_loop()
            runner = threading.Thread(target=loop.run_forever, name="pydantic-ai-loop", daemon=True)
            runner.start()
            watch = threading.Thread(
                target=_watch_loop, args=(loop, runner), name="pydantic-ai-loop-watch", daemon=True
            )
            watch.start()
            _loop = (os.getpid(), loop)
        return _loop[1]


def _watch_loop(loop: asyncio.AbstractEventLoop, runner: threading.Thread) -> None:
    """Logs each stall of the segments' loop, with where it is stuck. Every segment in flight in
    the process waits on that loop: an async tool doing blocking I/O (`requests`, `time.sleep`, a
    sync database call inside `async def`) stalls them all, which would otherwise show only as
    slowness everywhere. The fix is in the tool: make it a plain `def` (run in a thread) or await."""
    while runner.is_alive():
        answered = threading.Event()
        try:
            loop.call_soon_threadsafe(answered.set)
        except RuntimeError:  # the loop was closed
            return
        if not answered.wait(STALL_S):
            frame = sys._current_frames().get(runner.ident or 0)
            stack = "".join(traceback.format_stack(frame)[-3:]) if frame is not None else ""
            logger.warning(
                "The pydantic-ai event loop has not run for %.1f s: every pydantic-ai step in this "
                "process waits on it. An async tool doing blocking I/O does this; make it a plain def "
                "(run in a thread) or await its I/O. The loop is at:\n%s",
                STALL_S,
                stack,
            )
            answered.wait()  # one warning per stall
        time.sleep(STALL_S)


def _on_segments_loop(coro: Any) -> Any:
    """Run `coro` on the segments' loop and wait for it, here, in the step's thread."""
    future = asyncio.run_coroutine_threadsafe(coro, _segments_loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()  # the step's thread gave up (interrupted): so does the segment
        raise


class GatesHold(AbstractCapability[Any]):
    """Every segment's last word on a gated tool: a call of it runs only if a reviewer approved
    it (`approved`: this step's approved and edited calls), else it is deferred for approval just
    before it would run. `requires_approval=True` reaches the run as the tool definition's kind,
    which a `prepare` function (or a capability's `prepare_tools`) returning a fresh
    `ToolDefinition` silently resets to an ordinary tool's; and pydantic-ai's own approval (what
    `ctx.tool_call_approved` says) may come from a capability deciding deferred calls inline."""

    def __init__(self, gated: frozenset[str], *, approved: frozenset[str] = frozenset()) -> None:
        self.gated = gated
        self.approved = approved

    async def before_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        if call.tool_name not in self.gated:
            return args
        if not ctx.tool_call_approved:
            raise ApprovalRequired()  # pydantic-ai defers it: the run stops at its gate
        if call.tool_call_id not in self.approved:
            raise UnapprovedCall(
                f"the call {call.tool_call_id} of {call.tool_name!r} was approved inside the run "
                "(a capability deciding deferred tool calls), not by a reviewer: it did not run; "
                "remove that capability, the gate's reviewers decide"
            )
        return args


class DistinctCallIds(AbstractCapability[Any]):
    """Makes each model response one Gatehouse can store and key, before pydantic-ai reads it, as
    native agents' replies are (llm.reply_from): its text with lone surrogates replaced, each
    call's arguments keeping one as its JSON escape (and refused, `before_tool_validate`), each
    call with an id a gate can key (`distinct_call_ids`): pydantic-ai matches results and
    approvals to calls by id, and refuses a response repeating one."""

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: Any, response: ModelResponse
    ) -> ModelResponse:
        used = {
            call.tool_call_id
            for message in ctx.messages
            if isinstance(message, ModelResponse) and message is not response
            for call in message.tool_calls
        }
        calls = [part for part in response.parts if isinstance(part, ToolCallPart)]
        ids = distinct_call_ids([call.tool_call_id for call in calls], used=used)
        renamed = {id(call): new for call, new in zip(calls, ids, strict=True)}
        parts = [_storable_part(part, call_id=renamed.get(id(part), "")) for part in response.parts]
        model_name = llm.storable(response.model_name)
        if all(new is old for new, old in zip(parts, response.parts, strict=True)) and (
            model_name == response.model_name
        ):
            return response
        return replace(response, parts=parts, model_name=model_name)

    async def before_tool_validate(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        if problem := unstorable_arguments(args):
            # Refused as a native tool refuses them: the model is told why, no gate opens.
            raise ModelRetry(f"Invalid arguments for {call.tool_name}: {problem}")
        return args


def _storable_part(part: Any, *, call_id: str) -> Any:
    """The part of a model response with text a checkpoint (and the next request) can hold."""
    if isinstance(part, TextPart | ThinkingPart):
        content = llm.storable(part.content)
        return part if content == part.content else replace(part, content=content)
    if not isinstance(part, ToolCallPart):
        return part
    args = part.args
    if isinstance(args, dict) and unstorable_arguments(args):
        args = json.dumps(args)  # as JSON text, which keeps a surrogate as its escape (refused)
    if isinstance(args, str):
        stored = llm.storable_call(llm.ToolCall(id=call_id, name=part.tool_name, arguments=args))
        name, args = stored.name, stored.arguments
    else:
        name = llm.storable(part.tool_name)
    if (call_id, name, args) == (part.tool_call_id, part.tool_name, part.args):
        return part
    return replace(part, tool_call_id=call_id, tool_name=name, args=args)


class UnapprovedCall(RuntimeError):
    """A gated call pydantic-ai would run with no reviewer's approval: the step fails instead."""


class PydanticAIAgent(GatedToolsAgent):
    """A pydantic-ai agent as a Gatehouse agent; `gates` names the tools that need approval
    (declare them `requires_approval=True`) with their queue, decisions and description."""

    state_type = PydanticAIState

    def __init__(
        self,
        *,
        usage_limits: UsageLimits | None = None,
        deps: Callable[[GatehouseDeps], Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """`usage_limits` is `agent.run`'s, for the whole run: a run resumed after its approvals
        keeps counting what it used before them (pydantic-ai's default, 50 requests, without).
        `deps` builds the tools' `ctx.deps` from the step's GatehouseDeps (your own deps type,
        holding it for `run_once`); without it `ctx.deps` is the GatehouseDeps itself."""
        super().__init__(**kwargs)
        self.usage_limits = usage_limits
        self.deps = deps

    edit_note = (
        "A pydantic-ai thread: edit history, pydantic-ai's own messages, which the model reads; "
        "the conversation shown is drawn from it and cannot be edited on its own. A call awaiting "
        "approval whose arguments you change is asked again with them."
    )

    # The gate protocol: its edit form, and how an edit is checked.
    def _tool(self, action: str) -> Any:
        return self.agent._function_toolset.tools.get(action)

    def edit_schema(self, action: str) -> dict[str, Any]:
        tool = self._tool(action)
        return dict(tool.tool_def.parameters_json_schema) if tool is not None else {}

    def validate_edit(self, action: str, args: Any) -> dict[str, Any]:
        tool = self._tool(action)
        if tool is None:
            raise ToolArgumentsError(action, {"__all__": f"the tool {action!r} no longer exists"})
        schema = tool.function_schema
        try:
            validated = schema.validator.validate_python(args if args is not None else {})
        except pydantic.ValidationError as exc:
            raise ToolArgumentsError(action, plain_errors(None, exc)) from exc
        if schema.single_arg_name is not None:
            # A tool of one model argument is offered (and called) with that model's fields: the
            # validator wraps them as {name: model}; reviewers see and edit the fields themselves.
            validated = validated[schema.single_arg_name]
        dump = pydantic.TypeAdapter(Any).dump_python
        if dropped := dropped_fields(args, dump(validated, mode="json", by_alias=True)):
            raise ToolArgumentsError(action, dropped)
        return dump(validated, mode="json")

    def definition_errors(self) -> list[str]:
        errors = super().definition_errors()
        for action in self.gates:
            tool = self._tool(action)
            if tool is None:
                errors.append(
                    f"gate {action!r} names no tool of the pydantic-ai agent (a gated tool is the "
                    "agent's own, @agent.tool or Agent(tools=...), not a toolset's)"
                )
            elif not tool.requires_approval:
                errors.append(f"tool {action!r} is gated here: declare it requires_approval=True")
        for name, tool in self.agent._function_toolset.tools.items():
            if tool.requires_approval and name not in self.gates:
                errors.append(f"tool {name!r} requires approval: name it in gates, with its queue")
        errors += self.bypass_errors()
        deps_type = self.agent.deps_type
        if self.deps is None and deps_type is not type(None) and not issubclass(GatehouseDeps, deps_type):
            # Its tools would be handed GatehouseDeps where they read their own type's fields.
            errors.append(
                f"the agent's deps_type is {deps_type.__name__}: give deps=, a function building "
                f"its {deps_type.__name__} from the step's GatehouseDeps"
            )
        output = self.agent.output_type
        if DeferredToolRequests not in (output if isinstance(output, list | tuple) else [output]):
            errors.append("declare output_type=[..., DeferredToolRequests]: a run must stop for approvals")
        return errors

    def bypass_errors(self) -> list[str]:
        """What in the agent would decide a call needing approval without a gate's reviewer, or
        run one where no gate stands: refused by `manage.py check`, and again by every segment
        before it runs (a Celery worker runs no system checks)."""
        own = self.agent._function_toolset.tools
        gated = {name: own[name].function for name in self.gates if name in own}
        errors = []
        for where, agent in [("", self.agent), *_agents_run_by_tools(self.agent)]:
            errors += _approval_deciders(agent, where=where)
            for function in _output_functions(agent.output_type):
                # An output function runs when the model ends the run with it: never gated.
                if names := sorted(name for name, gated_fn in gated.items() if gated_fn is function):
                    errors.append(
                        f"{where}output function {function.__name__!r} is the gated tool "
                        f"{names[0]!r}, which would run unasked as the run's output: end the run "
                        "with text or a model, and let the tool make the change"
                    )
            for name, tool in _function_tools(agent).items():
                if not where:
                    if name not in gated and tool.function in gated.values() and not tool.requires_approval:
                        errors.append(
                            f"tool {name!r} runs a gated tool's function under another name, so it "
                            "would run unasked: give that function one tool, the gated one"
                        )
                elif tool.requires_approval:
                    errors.append(
                        f"{where}its tool {name!r} requires approval: a call inside another "
                        "agent's run cannot be gated; give that tool to this agent"
                    )
                elif name in gated or tool.function in gated.values():
                    errors.append(
                        f"{where}its tool {name!r} is gated here but not there, so it would run "
                        "unasked: give that tool to this agent only"
                    )
        return errors

    def edit_errors(self, *, before: dict[str, Any], after: dict[str, Any]) -> dict[str, str]:
        """pydantic-ai's `history` is what the model reads: a person edits that (checked here, not
        at the next step); the conversation shown is drawn from it."""
        stored = self.state.model_validate(before).model_dump(mode="json")
        if after["history_format"] != stored["history_format"]:
            return {"history_format": f"says how history is stored; it stays {stored['history_format']!r}"}
        if after["messages"] != stored["messages"]:
            return {
                "messages": "the conversation shown is drawn from pydantic-ai's history, which is what "
                "the model reads: edit history"
            }
        if after["history"] == stored["history"]:
            return {}
        problem = self._history_problem(after["history"])
        return {"history": problem} if problem else {}

    def import_problem(self, values: dict[str, Any], *, exported_from: str) -> str:
        """Why an imported history cannot stand ("" if it can): a call id used twice would be
        one gate asked about two calls, the reviewer seeing one and approving both."""
        repeated = _repeated_call_id(_history(self.state.model_validate(values)))
        return f"history: the call id {repeated} is used twice" if repeated else ""

    def _history_problem(self, raw: list[dict[str, Any]]) -> str:
        """What makes `raw` a history no run may continue from ("" if none)."""
        try:
            history = ModelMessagesTypeAdapter.validate_python(raw)
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            return f"is not pydantic-ai's message history ({where}: {error['msg']})"
        if not history:
            return "cannot be empty: a run continues from its history"
        for message in history:
            for call in message.tool_calls if isinstance(message, ModelResponse) else []:
                if not _json_object(call.args):
                    return f"the arguments of call {call.tool_call_id} are not a JSON object"
        if repeated := _repeated_call_id(history):  # one request per call: it would be one gate twice
            return f"the call id {repeated} is used twice"
        # The calls that will be asked about must be calls their tools accept, as an edit must.
        for gate in self._gates(
            history[-1].tool_calls if history and isinstance(history[-1], ModelResponse) else []
        ):
            try:
                self.validate_edit(gate.action, gate.args)
            except ToolArgumentsError as exc:
                problems = "; ".join(f"{field}: {text}" for field, text in exc.errors.items())
                return f"the call {gate.key} to {gate.action} has invalid arguments ({problems})"
        return ""

    def edited_state(self, *, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        """The shown calls follow an edited history: a call whose arguments changed is shown with
        the new ones, marked edited (new gates are asked from the history itself)."""
        args = {
            call.tool_call_id: call.args_as_json_str()
            for message in ModelMessagesTypeAdapter.validate_python(after["history"])
            if isinstance(message, ModelResponse)
            for call in message.tool_calls
        }
        shown = []
        for message in after["messages"]:
            calls = [
                {**c, "function": {**c["function"], "arguments": args[c["id"]]}, "edited": True}
                if c.get("id") in args and json.loads(args[c["id"]]) != json.loads(c["function"]["arguments"])
                else c
                for c in message.get("tool_calls") or []
            ]
            shown.append({**message, "tool_calls": calls} if calls else message)
        return {**after, "messages": shown}

    def pending_gates(self, state: Any, next_node: str) -> list[Gate]:
        """The gated calls of the last model response that have no result yet."""
        if next_node != NODE:
            return []
        history = _history(state)
        if not history or not isinstance(history[-1], ModelResponse):
            return []
        return self._gates(history[-1].tool_calls)

    def _gates(self, calls: list[Any]) -> list[Gate]:
        return [
            self.gate(key=call.tool_call_id, action=call.tool_name, args=call.args_as_dict())
            for call in calls
            if call.tool_name in self.gates
        ]

    def run_segment(self, state: Any, ctx: StepContext) -> Step:
        """Run the agent until it finishes or waits for approvals: one checkpoint."""
        gatehouse = GatehouseDeps.of(ctx)
        deps = self.deps(gatehouse) if self.deps is not None else gatehouse
        history = _history(state)
        results = _results(ctx.decisions) if ctx.decisions else None
        # A new prompt starts a run; decisions resume the one the history ends in.
        usage = _run_usage(history) if results is not None else None
        headers = llm.offline_headers()  # read here, in the step's thread
        if problems := self.bypass_errors():  # registered although `manage.py check` says no
            raise RuntimeError(f"agent {self.name!r} cannot run: {'; '.join(problems)}")
        ran = (Decision.APPROVE, Decision.EDIT)
        approved = frozenset(key for key, decision in ctx.decisions.items() if decision.kind in ran)

        async def segment() -> Any:
            # Set here: the executor is a context variable, and the loop's task has its own context.
            with pydantic_ai.Agent.using_thread_executor(_tool_threads):
                return await self.agent.run(
                    state.prompt or None,
                    message_history=history or None,
                    deferred_tool_results=results,
                    deps=deps,
                    model_settings={"extra_headers": headers},
                    usage_limits=self.usage_limits,
                    usage=usage,
                    capabilities=[DistinctCallIds(), GatesHold(self.gated_actions(), approved=approved)],
                )

        try:
            result = _on_segments_loop(segment())
        except ModelHTTPError as exc:
            if exc.status_code >= 500 or exc.status_code == 429:
                raise llm.ModelUnavailable(f"model unavailable: {exc}") from exc
            raise
        except llm.TRANSIENT as exc:
            raise llm.ModelUnavailable(f"model unavailable: {exc}") from exc
        new = result.new_messages()
        update: dict[str, Any] = {
            "history": ModelMessagesTypeAdapter.dump_python(new, mode="json"),
            "messages": [*edited_calls(state.messages, ctx.decisions), *_chat(new)],
            "prompt": "",
        }
        meta = {"model": _model_name(new), "offline": llm.is_offline()}
        if isinstance(result.output, DeferredToolRequests):
            if result.output.calls:
                raise RuntimeError("external (deferred) tool calls are not supported; gate them instead")
            if ungated := sorted({c.tool_name for c in result.output.approvals} - self.gates.keys()):
                # Without a gate nobody is asked: the run would wait on them for ever.
                raise RuntimeError(
                    f"tools {ungated} asked for approval (ApprovalRequired) but have no gate: "
                    "declare them requires_approval=True and name them in gates"
                )
            return Step(
                update=update,
                goto=NODE,
                gates=self._gates(result.output.approvals),
                resumed=bool(ctx.decisions),
                metadata=meta,
            )
        if not isinstance(result.output, str):
            # A structured output ends the run through an output tool: say it, as the answer.
            answer = pydantic.TypeAdapter(Any).dump_json(result.output).decode()
            update["messages"].append({"id": new_message_id(), "role": "assistant", "content": answer})
        return Step(update=update, goto=None, resumed=bool(ctx.decisions), metadata=meta)


def _toolsets(toolsets: Any) -> list[AbstractToolset[Any]]:
    """Every toolset in `toolsets`, those wrapped or combined in others included."""
    found: list[AbstractToolset[Any]] = []
    for toolset in toolsets:
        found.append(toolset)
        if isinstance(toolset, WrapperToolset):
            found += _toolsets([toolset.wrapped])
        elif isinstance(toolset, CombinedToolset):
            found += _toolsets(toolset.toolsets)
    return found


def _function_tools(agent: Any) -> dict[str, Any]:
    """The function tools of `agent` (its own and its function toolsets'), by name."""
    return {
        name: tool
        for toolset in _toolsets(agent.toolsets)
        if isinstance(toolset, FunctionToolset)
        for name, tool in toolset.tools.items()
    }


def _agents_run_by_tools(agent: Any) -> list[tuple[str, Any]]:
    """(how it is reached, the agent) for each pydantic-ai agent a tool, output function or
    output validator of `agent` runs in its body (agent delegation: `await other.run(...,
    deps=ctx.deps, usage=ctx.usage)`), nested."""
    found: list[tuple[str, Any]] = []
    seen = {id(agent)}
    todo: list[tuple[str, Any]] = [("", agent)]
    while todo:
        where, outer = todo.pop(0)
        runners = [(f"tool {name!r}", tool.function) for name, tool in _function_tools(outer).items()]
        runners += [(f"output function {f.__name__!r}", f) for f in _output_functions(outer.output_type)]
        validators = [v.function for v in outer._output_validators]
        runners += [(f"output validator {f.__name__!r}", f) for f in validators]
        for runner, function in runners:
            for inner in objects_used_by(function, kind=pydantic_ai.Agent):
                if id(inner) not in seen:
                    seen.add(id(inner))
                    reached = (f"{where}{runner} runs agent {inner.name or 'unnamed'!r}: ", inner)
                    found.append(reached)
                    todo.append(reached)
    return found


def _output_functions(output: Any) -> list[Any]:
    """The functions in an agent's `output_type` (bare, or in ToolOutput, NativeOutput,
    PromptedOutput or TextOutput): pydantic-ai runs one when the model ends the run with it."""
    if isinstance(output, list | tuple):
        return [f for item in output for f in _output_functions(item)]
    if isinstance(output, types.FunctionType | types.MethodType):
        return [output]
    if type(output).__module__ == "pydantic_ai.output":
        wrapped = [getattr(output, a) for a in ("output", "outputs", "output_function") if hasattr(output, a)]
        return _output_functions(wrapped)
    return []


def _approval_deciders(agent: Any, *, where: str) -> list[str]:
    """What in `agent` decides approvals (or defers calls) itself, where no gate's reviewer is
    asked: approval toolsets, external tools, capabilities handling deferred tool calls."""
    errors = []
    for toolset in _toolsets(agent.toolsets):
        # Their calls stop the run for someone other than a gate's reviewers: the step would
        # fail at the first one. (Gated tools are the agent's own: a gate names each.)
        if isinstance(toolset, ApprovalRequiredToolset):
            errors.append(
                f"{where}toolset {toolset.label!r} decides approvals itself (approval_required): "
                "gate the agent's own tools, declared requires_approval=True, instead"
            )
        elif isinstance(toolset, ExternalToolset):
            errors.append(f"{where}toolset {toolset.label!r} holds external (deferred) tools: not supported")
    for capability in _capabilities(agent._root_capability):
        # It answers the calls awaiting approval inside the run (HandleDeferredToolCalls
        # approving them all, say): the gate's reviewers would never be asked.
        errors.append(
            f"{where}capability {type(capability).__name__} decides deferred tool calls itself: "
            "remove it; the gates' reviewers decide calls needing approval"
        )
    return errors


def _capabilities(capability: Any) -> list[Any]:
    """The capabilities within `capability` that decide deferred tool calls themselves (hooks
    are left to the run's check: GatesHold refuses a call no reviewer approved)."""
    if isinstance(capability, CombinedCapability):
        return [c for inner in capability.capabilities for c in _capabilities(inner)]
    if isinstance(capability, WrapperCapability):
        return _capabilities(capability.wrapped)
    decides = type(capability).handle_deferred_tool_calls is not AbstractCapability.handle_deferred_tool_calls
    return [capability] if decides and not isinstance(capability, Hooks) else []


def _run_usage(history: list[ModelMessage]) -> RunUsage:
    """What the run the history ends in used before this segment: its model responses (their
    tokens and cost) and its tools' successful results since the person's last prompt."""
    usage = RunUsage()
    for message in reversed(history):
        if isinstance(message, ModelResponse):
            usage.requests += 1
            usage.incr(message.usage)
        elif any(part.part_kind == "user-prompt" for part in message.parts):
            break  # where the run began
        else:
            usage.tool_calls += sum(
                1 for part in message.parts if part.part_kind == "tool-return" and part.outcome == "success"
            )
    return usage


def _repeated_call_id(history: list[ModelMessage]) -> str:
    """The first tool call id the history uses twice ("" if none)."""
    seen: set[str] = set()
    for message in history:
        for call in message.tool_calls if isinstance(message, ModelResponse) else []:
            if call.tool_call_id in seen:
                return call.tool_call_id
            seen.add(call.tool_call_id)
    return ""


def _json_object(args: Any) -> bool:
    """Whether a call's stored arguments are a JSON object (pydantic-ai reads other text as
    {"INVALID_JSON": text} rather than refusing it)."""
    if not args or isinstance(args, dict):
        return True
    try:
        return isinstance(json.loads(args), dict)
    except (TypeError, ValueError):
        return False


def _history(state: Any) -> list[ModelMessage]:
    if state.history_format != HISTORY_FORMAT:
        raise ValueError(f"history is {state.history_format!r}; this version reads {HISTORY_FORMAT!r}")
    return ModelMessagesTypeAdapter.validate_python(state.history)


def _results(decisions: dict[str, HumanDecision]) -> DeferredToolResults:
    approvals: dict[str, Any] = {}
    for key, decision in decisions.items():
        if decision.kind == Decision.APPROVE:
            approvals[key] = True
        elif decision.kind == Decision.EDIT:
            approvals[key] = ToolApproved(override_args=decision.args)
        elif decision.kind == Decision.RESPOND:
            approvals[key] = ToolDenied(message=decision.message)
        else:
            approvals[key] = ToolDenied(message=rejection_text(decision))
    return DeferredToolResults(approvals=approvals)


def _chat(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """pydantic-ai's messages in the chat shape the pages show (the person's prompt is already
    shown: it was stored when they sent it)."""
    shown: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            calls = [
                {
                    "id": c.tool_call_id,
                    "type": "function",
                    "function": {"name": c.tool_name, "arguments": c.args_as_json_str()},
                }
                for c in message.tool_calls
            ]
            shown.append(
                {
                    "id": new_message_id(),
                    "role": "assistant",
                    "content": message.text or None,
                    **({"tool_calls": calls} if calls else {}),
                }
            )
        elif isinstance(message, ModelRequest):
            for part in message.parts:
                if part.part_kind == "tool-return":
                    content = part.content if isinstance(part.content, str) else part.model_response_str()
                    shown.append(
                        {
                            "id": new_message_id(),
                            "role": "tool",
                            "tool_call_id": part.tool_call_id,
                            "content": content,
                        }
                    )
                elif part.part_kind == "retry-prompt" and part.tool_name:
                    shown.append(
                        {
                            "id": new_message_id(),
                            "role": "tool",
                            "tool_call_id": part.tool_call_id,
                            "content": f"Error: {part.model_response()}",
                        }
                    )
    return shown


def _model_name(messages: list[ModelMessage]) -> str:
    names = [m.model_name for m in messages if isinstance(m, ModelResponse) and m.model_name]
    return names[-1] if names else ""
