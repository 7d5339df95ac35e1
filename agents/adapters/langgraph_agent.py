"""LangGraph graphs behind Gatehouse's inbox.

`LangGraphAgent(name=..., graph=<StateGraph builder or compiled graph>, queue=...)` runs the
graph one *segment* per step: `graph.invoke` until it ends or stops at `interrupt()`s. LangGraph
keeps its own checkpoints in Gatehouse's store (`checkpoints.langgraph.GatehouseSaver`, LangGraph
thread id = the Gatehouse thread id); each segment is one Gatehouse checkpoint that names the
LangGraph checkpoint it ended at, holds the pending interrupts and the conversation the pages
show. Every action an interrupt asks about is one gate, so one request in the inbox.

Interrupt values understood (anything else is refused with a clear error):
- LangChain's human-in-the-loop request, as `HumanInTheLoopMiddleware` raises it:
  `{"action_requests": [{"name", "args", "description"}], "review_configs": [{"action_name",
  "allowed_decisions"}]}`, resumed with `{"decisions": [...]}` in request order
  (`{"type": "approve"}`, `{"type": "edit", "edited_action": {"name", "args"}}`,
  `{"type": "reject", "message"}`).
- Agent Inbox's `HumanInterrupt` list (`{"action_request": {"action", "args"}, "config":
  {"allow_accept", "allow_edit", "allow_respond", "allow_ignore"}, "description"}`), resumed
  with its response list (`accept`, `edit`, `response`; a reject is a `response` with the
  reason).
Several interrupts at once resume together: `Command(resume={interrupt_id: value, ...})`.

What runs again: LangGraph re-runs an interrupted node from its start when it resumes, and a
retried step re-runs its segment from the LangGraph checkpoint it started at. A tool with a side
effect wraps it in `gatehouse_step().run_once(tool_call_id, fn)` so it happens once per call.
"""

import contextvars
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import cached_property, partial
from typing import Any

import pydantic
from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph, StateGraph
from langgraph.types import Command
from pydantic_core import to_jsonable_python

from agents.adapters.base import NODE, GatehouseDeps, SegmentAgent, SegmentState
from agents.gates import HumanDecision
from agents.graph import Gate, Retention, Step, StepContext
from agents.llm import parse_arguments
from agents.messages import message_errors
from agents.prebuilt import approval_errors, rejection_text
from agents.state import new_message_id
from agents.tools import Approval, Decision, ToolArgumentsError, plain_errors

RESUME = "__resume__"  # the channel LangGraph records an interrupt's answer in (private there)
HITL_DECISIONS = {"approve": Decision.APPROVE, "edit": Decision.EDIT, "reject": Decision.REJECT}
CallAsked = tuple[str, str, str | None]
"""(gate key, action, the id of the tool call it asks about, None if no call matches)."""

_step: contextvars.ContextVar[GatehouseDeps] = contextvars.ContextVar("gatehouse_step")


def gatehouse_step() -> GatehouseDeps:
    """Inside a LangGraph node run by Gatehouse: the step's thread, checkpoint and run_once."""
    return _step.get()


@contextmanager
def _in_step(deps: GatehouseDeps) -> Iterator[None]:
    token = _step.set(deps)
    try:
        yield
    finally:
        _step.reset(token)


def gate_key(interrupt_id: str, index: int) -> str:
    """The gate of the index-th action an interrupt asks about."""
    return f"{interrupt_id}:{index}"


def split_gate_key(key: str) -> tuple[str, int]:
    """(interrupt id, index) of a gate key."""
    interrupt_id, index = key.rsplit(":", 1)
    return interrupt_id, int(index)


class LangGraphState(SegmentState):
    langgraph_thread: str = ""
    """The LangGraph thread that holds langgraph_checkpoint: this thread's id, or the thread it
    was imported from (its first segment copies that thread's LangGraph checkpoints)."""
    langgraph_checkpoint: str = ""
    """The LangGraph checkpoint this Gatehouse checkpoint stands for (the next segment's start)."""
    interrupts: list[dict[str, Any]] = []
    """The interrupts pending there: [{"id", "value"}]."""
    pending_edit: bool = False
    """A person edited `messages`: the next segment writes the edit to LangGraph's state first
    (and the interrupts above are not asked: the node that raised them runs again)."""


class LangGraphAgent(SegmentAgent):
    """A LangGraph graph as a Gatehouse agent. `queue` takes every request; `approvals` may give
    an action its own queue, wording or expiry; `tools` (LangChain tools) give an action's edit
    form and check an edit against the tool's arguments."""

    def __init__(
        self,
        *,
        name: str,
        graph: StateGraph[Any] | CompiledStateGraph[Any],
        queue: str = "default",
        approvals: dict[str, Approval] | None = None,
        tools: list[Any] | None = None,
        description: str = "",
        retention: Retention | None = None,
    ) -> None:
        super().__init__(name=name, state=LangGraphState, description=description, retention=retention)
        self.graph = graph
        self.queue = queue
        self.overrides = approvals or {}
        self.tools = {t.name: t for t in tools or []}

    @cached_property
    def compiled(self) -> CompiledStateGraph[Any]:
        from checkpoints.langgraph import GatehouseSaver

        builder = self.graph.builder if isinstance(self.graph, CompiledStateGraph) else self.graph
        return builder.compile(checkpointer=GatehouseSaver(agent=self.name))

    @property
    def saver(self) -> BaseCheckpointSaver[Any]:
        saver = self.compiled.checkpointer
        assert isinstance(saver, BaseCheckpointSaver)
        return saver

    def definition_errors(self) -> list[str]:
        errors = super().definition_errors() + approval_errors(Approval(queue=self.queue), where="queue")
        for action, approval in self.overrides.items():
            errors += approval_errors(approval, where=f"approval {action!r}")
        return errors

    # The gate protocol.
    def approval_for(self, action: str) -> Approval:
        return self.overrides.get(action) or Approval(queue=self.queue)

    def approvals(self) -> list[Approval]:
        return [Approval(queue=self.queue), *self.overrides.values()]

    def edit_schema(self, action: str) -> dict[str, Any]:
        tool = self.tools.get(action)
        return tool.tool_call_schema.model_json_schema() if tool is not None else {}

    def validate_edit(self, action: str, args: Any) -> dict[str, Any]:
        if not isinstance(args, dict):
            raise ToolArgumentsError(action, {"__all__": "The arguments must be a JSON object"})
        tool = self.tools.get(action)
        if tool is None:
            return args
        schema = tool.tool_call_schema
        # As native and pydantic-ai tools do: an unknown key is refused, not silently dropped.
        unknown = sorted(set(args) - set(schema.model_fields))
        if unknown:
            raise ToolArgumentsError(action, {k: "is not an argument of this tool" for k in unknown})
        try:
            return schema.model_validate(args).model_dump(mode="json")
        except pydantic.ValidationError as exc:
            raise ToolArgumentsError(action, plain_errors(schema, exc)) from exc

    fork_note = (
        "A LangGraph thread: the fork runs the graph again from LangGraph's own checkpoint at this "
        "step; a node stopped at an interrupt re-runs from its start, and a gate decided on another "
        "branch is asked again. Only its messages can be edited."
    )

    edit_note = (
        "A LangGraph thread: edit its conversation (messages); the other fields say where LangGraph's "
        "own checkpoints stand. A changed message replaces its original, a removed one is removed, a "
        "new one goes at the end. The next step writes the edit with LangGraph's update_state and runs "
        "on: a node stopped at an interrupt runs again and asks about the edited state."
    )

    def edit_errors(self, *, before: dict[str, Any], after: dict[str, Any]) -> dict[str, str]:
        """A person edits the conversation; the other fields say where LangGraph's checkpoints stand."""
        stored = self.state.model_validate(before).model_dump(mode="json")
        changed = sorted(k for k in after if k != "messages" and after[k] != stored.get(k))
        if changed:
            return {
                k: "says where LangGraph's own checkpoints stand: only messages can be edited"
                for k in changed
            }
        if after.get("messages") == stored.get("messages"):
            return {}
        if getattr(self.compiled.channels.get("messages"), "operator", None) is not add_messages:
            # An edit replaces and removes messages by id: LangGraph's add_messages reducer does.
            return {"messages": "this graph's state has no messages channel reduced by add_messages"}
        if not stored.get("langgraph_checkpoint"):
            return _question_errors(stored["messages"], after["messages"])
        # The stored shape native agents keep (arguments as text, unique call ids): _chat and the
        # next segment read it.
        if errors := message_errors(after["messages"]):
            return errors
        for index, message in enumerate(after["messages"]):
            if message not in stored["messages"]:
                try:
                    _langchain(message)
                except Exception as exc:  # a person's input, in any shape
                    return {f"messages.{index}": f"is not a chat message LangChain can read: {exc}"}
        return {}

    def edited_state(self, *, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        """The next segment writes the edit to LangGraph's state before it runs on (the
        interrupted node asks again about the edited state)."""
        stored = self.state.model_validate(before).model_dump(mode="json")
        if after == stored:
            return after
        if not stored["langgraph_checkpoint"]:  # the graph has not run: its first input changes
            return {**after, "prompt": after["messages"][-1]["content"]}
        return {**after, "pending_edit": True}

    def reduced_messages(self, messages: list[dict[str, Any]], update: Any) -> list[dict[str, Any]]:
        """The conversation after LangGraph's add_messages reduces `update` into it (a message or a
        list, in any shape LangChain reads: a known id replaces its message, a RemoveMessage removes
        one, others go at the end), in the shape the pages show: what a LangGraph client's
        update_state asks for, as an edit. Raises ValueError on what LangChain cannot read."""
        current: list[Any] = [_langchain(m) for m in messages]
        reduced: list[BaseMessage] = add_messages(current, update)  # type: ignore[assignment]
        return _chat(reduced, before=messages)

    def shown_as_langchain(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Messages as the pages show them, as LangChain dumps them (a LangGraph client's shape)."""
        return [_langchain(m).model_dump(mode="json") for m in messages]

    def _write_edit(self, config: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
        """Make the conversation at LangGraph's checkpoint `config` the one a person edited, with
        LangGraph's own update_state: a changed message replaces its original (same id), a removed
        one is removed, a new one goes at the end. The config of the checkpoint it wrote."""
        graph = self.compiled
        stored = graph.get_state(config).values.get("messages", [])  # type: ignore[arg-type]
        shown = {m["id"]: _comparable(m) for m in _chat(stored, before=[])}
        kept = {m.get("id") for m in messages}
        update: list[BaseMessage] = [RemoveMessage(id=i) for i in shown if i not in kept]
        update += [_langchain(m) for m in messages if shown.get(m.get("id")) != _comparable(m)]
        if not update:
            return config
        return dict(graph.update_state(config, {"messages": update}))  # type: ignore[arg-type]

    def pending_gates(self, state: Any, next_node: str) -> list[Gate]:
        return self._gates(state.interrupts) if next_node == NODE and not state.pending_edit else []

    def _gates(self, interrupts: list[dict[str, Any]]) -> list[Gate]:
        gates = []
        for interrupt in interrupts:
            for index, (action, proposed, description, decisions) in enumerate(_asked(interrupt["value"])):
                args = self.checked_args(action, proposed)
                approval = self.approval_for(action)
                allowed = tuple(d for d in approval.decisions if d in decisions)
                gates.append(
                    Gate(
                        key=gate_key(interrupt["id"], index),
                        action=action,
                        args=args,
                        # The interrupt says which decisions it takes; the wording is ours if set.
                        approval=replace(
                            approval,
                            decisions=allowed or (Decision.APPROVE, Decision.REJECT),
                            description=approval.description or description,
                        ),
                        description=approval.describe(args) if approval.description else description,
                    )
                )
        return gates

    def _adopt(self, source: str, config: dict[str, Any]) -> None:
        """Give an imported thread its own copy of the LangGraph checkpoints it names."""
        saver = self.saver
        if source == config["configurable"]["thread_id"] or saver.get_tuple(config) is not None:  # type: ignore[arg-type]
            return
        if saver.get_tuple({"configurable": {**config["configurable"], "thread_id": source}}) is None:
            raise ValueError(
                f"LangGraph checkpoint {config['configurable']['checkpoint_id']} of thread {source!r} "
                "is not in this installation's store: a LangGraph thread imports only where it ran"
            )
        saver.copy_thread(source, config["configurable"]["thread_id"])

    def import_problem(self, values: dict[str, Any], *, exported_from: str) -> str:
        """Why an imported state cannot stand here ("" if it can). It may name only LangGraph
        checkpoints of the thread it was exported from that are in this installation's store, with
        the interrupts LangGraph holds there: its gates are asked from those interrupts and a
        decision resumes LangGraph there, so what a reviewer approves is what runs."""
        state: Any = self.state.model_validate(values)  # a LangGraphState
        if not state.langgraph_checkpoint:
            return ""
        if state.langgraph_thread != exported_from:
            return (
                f"langgraph_thread {state.langgraph_thread!r} is not the thread it was exported from "
                f"({exported_from!r}): an import adopts only its own thread's LangGraph checkpoints"
            )
        config = self.checkpoint_config(values, thread_id=exported_from)
        if self.saver.get_tuple(config) is None:  # type: ignore[arg-type]
            return (
                f"LangGraph checkpoint {state.langgraph_checkpoint} of thread {exported_from!r} is not in "
                "this installation's store: a LangGraph thread imports only where it ran"
            )
        snapshot = self.compiled.get_state(config)  # type: ignore[arg-type]
        held = [{"id": i.id, "value": i.value} for task in snapshot.tasks for i in task.interrupts]
        if to_jsonable_python(held) != to_jsonable_python(state.interrupts):
            return (
                f"its interrupts are not those LangGraph holds at checkpoint {state.langgraph_checkpoint} "
                f"(LangGraph holds {json.dumps(to_jsonable_python(held))[:300]})"
            )
        return ""

    def _root(self, thread_id: str) -> str | None:
        """LangGraph's first checkpoint of the thread (its first input), if it has run."""
        first = self.saver.list(
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}, filter={"step": -1}
        )
        return min((c.config["configurable"]["checkpoint_id"] for c in first), default=None)

    def _has_run(self, thread_id: str) -> bool:
        """Whether LangGraph holds any checkpoint of the thread."""
        found = self.saver.list({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}, limit=1)
        return next(iter(found), None) is not None

    def _answered(self, config: dict[str, Any]) -> bool:
        """Whether LangGraph holds an answer at this checkpoint already: a fork back to a gate
        decided on another branch (LangGraph would replay that answer, not apply this one)."""
        found = self.saver.get_tuple(config)  # type: ignore[arg-type]
        return found is not None and any(channel == RESUME for _, channel, _ in found.pending_writes or [])

    def _ask_again(
        self, config: dict[str, Any], interrupts: list[dict[str, Any]], decisions: dict[str, HumanDecision]
    ) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, HumanDecision]]:
        """Branch LangGraph from the checkpoint (as its time travel does) and run to the same
        interrupts again; they get new ids, so the decisions move to them in order."""
        graph = self.compiled
        fork = graph.update_state(config, None)  # type: ignore[arg-type]
        graph.invoke(None, fork)
        asked = graph.get_state({"configurable": {"thread_id": config["configurable"]["thread_id"]}})
        fresh = [{"id": i.id, "value": i.value} for task in asked.tasks for i in task.interrupts]
        if [i["value"] for i in fresh] != [i["value"] for i in interrupts]:
            raise RuntimeError("the graph asked something else when run again from this checkpoint")
        new_ids = {old["id"]: new["id"] for old, new in zip(interrupts, fresh, strict=True)}
        moved = {}
        for key, decision in decisions.items():
            interrupt_id, index = split_gate_key(key)
            moved[gate_key(new_ids[interrupt_id], index)] = decision
        return dict(asked.config), fresh, moved

    def _asked_at(self, config: dict[str, Any], interrupts: list[dict[str, Any]]) -> list[CallAsked]:
        """What the interrupts pending at LangGraph's checkpoint `config` ask, before an edit
        changes its conversation: _calls_asked of its messages there."""
        if not interrupts:
            return []
        stored = self.compiled.get_state(config).values.get("messages", [])  # type: ignore[arg-type]
        return _calls_asked(interrupts, _chat(stored, before=[]))

    def checkpoint_config(self, values: dict[str, Any], *, thread_id: str) -> dict[str, Any]:
        """LangGraph's config for the checkpoint a stored state names (checkpoint_id "" if none),
        in the LangGraph thread that holds it."""
        holder = values.get("langgraph_thread") or thread_id
        checkpoint_id = values.get("langgraph_checkpoint") or ""
        return {"configurable": {"thread_id": holder, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}

    def run_segment(self, state: Any, ctx: StepContext) -> Step:
        """Run the graph until it ends or interrupts: one checkpoint."""
        graph = self.compiled
        config: dict[str, Any] = {"configurable": {"thread_id": ctx.thread_id}}
        if state.langgraph_checkpoint:
            config["configurable"]["checkpoint_id"] = state.langgraph_checkpoint
            self._adopt(state.langgraph_thread or ctx.thread_id, config)
        elif root := self._root(ctx.thread_id):
            # Before the first segment, on a thread that has run: a fork from its start. Run from
            # LangGraph's first checkpoint, not on from its latest (another branch's end).
            config["configurable"]["checkpoint_id"] = root
        elif self._has_run(ctx.thread_id):  # ...whose first checkpoint is gone (retention keeps it)
            raise RuntimeError(
                "LangGraph's first checkpoint of this thread is gone: its start cannot run again "
                "(fork from a later checkpoint)"
            )
        asked_before: list[CallAsked] = []
        if state.pending_edit:
            asked_before = self._asked_at(config, state.interrupts)
            config = self._write_edit(config, state.messages)
        graph_input: Any = None
        deps = GatehouseDeps.of(ctx)
        if ctx.decisions:
            # The keys of this checkpoint's requests, before _ask_again gives the interrupts new ids.
            gate_of = _gate_of_call(state.interrupts, state.messages)
            deps = replace(deps, run_once=partial(_run_once_as_gate, ctx.run_once, gate_of))
            interrupts, decisions = state.interrupts, ctx.decisions
            if self._answered(config):
                config, interrupts, decisions = self._ask_again(config, interrupts, decisions)
            graph_input = Command(resume=_resume(interrupts, decisions))
        elif state.prompt:
            # The id of the message already shown, so the graph's copy replaces it on the page.
            shown = state.messages[-1]["id"] if state.messages else None
            graph_input = {"messages": [HumanMessage(state.prompt, id=shown)]}
        with _in_step(deps):
            graph.invoke(graph_input, config)  # type: ignore[call-overload]
        snapshot = graph.get_state({"configurable": {"thread_id": ctx.thread_id}})
        interrupts = [{"id": i.id, "value": i.value} for task in snapshot.tasks for i in task.interrupts]
        update = {
            "langgraph_thread": ctx.thread_id,
            "messages": _chat(snapshot.values.get("messages", []), before=state.messages),
            "langgraph_checkpoint": snapshot.config["configurable"]["checkpoint_id"],
            "interrupts": interrupts,
            "prompt": "",
            "pending_edit": False,
        }
        resumed = bool(ctx.decisions)
        if interrupts:
            gates = self._gates(interrupts)
            if asked_before:
                gates = _asking_again(
                    gates, before=asked_before, now=_calls_asked(interrupts, update["messages"])
                )
            return Step(update=update, goto=NODE, gates=gates, resumed=resumed)
        return Step(update=update, goto=None, resumed=resumed)


Asked = tuple[str, dict[str, Any], str, set[Decision]]
"""(action, args, description, the decisions the interrupt allows)."""


def _is_langchain_request(value: Any) -> bool:
    """LangChain's human-in-the-loop request (else Agent Inbox's HumanInterrupt list)."""
    return isinstance(value, dict) and "action_requests" in value


def _asked(value: Any) -> list[Asked]:
    """The actions an interrupt asks a person about, in order. Raises ValueError, saying what is
    wrong, on an interrupt Gatehouse cannot read (the thread then fails with that message)."""
    if _is_langchain_request(value):
        asked = _hitl_asked(value)
    else:
        items = value if isinstance(value, list) else [value]
        if not (items and all(isinstance(i, dict) and "action_request" in i for i in items)):
            raise ValueError(
                "an interrupt Gatehouse can put in the inbox is LangChain's human-in-the-loop request "
                f"or Agent Inbox's HumanInterrupt list; got {json.dumps(value, default=str)[:200]}"
            )
        asked = [_inbox_asked(item) for item in items]
    if not asked:
        # No gate to decide: the step would stop at the interrupt and run again for ever.
        raise ValueError("an interrupt asks about no action (its action_requests is empty)")
    return asked


def _hitl_asked(value: dict[str, Any]) -> list[Asked]:
    requests, configs = value["action_requests"], value.get("review_configs") or []
    if not isinstance(requests, list) or not isinstance(configs, list):
        raise ValueError("an interrupt's action_requests and review_configs must be lists")
    if not all(isinstance(c, dict) for c in configs):
        raise ValueError("each of an interrupt's review_configs must be an object")
    allowed_of = {c.get("action_name"): c.get("allowed_decisions") for c in configs}
    asked: list[Asked] = []
    for request in requests:
        name, args = _action(request, name_key="name")
        allowed = allowed_of.get(name) or list(HITL_DECISIONS)
        if not isinstance(allowed, list):
            raise ValueError(f"the allowed_decisions of action {name!r} must be a list")
        decisions = {HITL_DECISIONS[d] for d in allowed if isinstance(d, str) and d in HITL_DECISIONS}
        asked.append((name, args, str(request.get("description") or ""), decisions))
    return asked


def _inbox_asked(item: dict[str, Any]) -> Asked:
    config = item.get("config") or {}
    if not isinstance(config, dict):
        raise ValueError("a HumanInterrupt's config must be an object")
    decisions = {Decision.REJECT}
    if config.get("allow_accept"):
        decisions.add(Decision.APPROVE)
    if config.get("allow_edit"):
        decisions.add(Decision.EDIT)
    if config.get("allow_respond"):
        decisions.add(Decision.RESPOND)
    name, args = _action(item["action_request"], name_key="action")
    return (name, args, str(item.get("description") or ""), decisions)


def _action(request: Any, *, name_key: str) -> tuple[str, dict[str, Any]]:
    """An interrupt's action request: its name and its arguments (an object)."""
    if not isinstance(request, dict) or not isinstance(request.get(name_key), str):
        raise ValueError(f"an interrupt's action request must be an object with a {name_key!r} string")
    args = request.get("args") or {}
    if not isinstance(args, dict):
        raise ValueError(f"the args of action {request[name_key]!r} must be an object")
    return request[name_key], dict(args)


def _gate_of_call(interrupts: list[dict[str, Any]], messages: list[dict[str, Any]]) -> dict[str, str]:
    """The gate key of each tool call the interrupts ask about, by the call's id. An interrupt
    names an action and its arguments, not a call: the call is the first unclaimed one with that
    name and those arguments in the last message that made calls (the message LangChain's
    middleware, or a tools node, interrupts to ask about)."""
    made: list[dict[str, Any]] = next(
        (m["tool_calls"] for m in reversed(messages) if m.get("tool_calls")), []
    )
    unclaimed = [(c["id"], c["function"]["name"], parse_arguments(c["function"]["arguments"])) for c in made]
    gate_of = {}
    for interrupt in interrupts:
        for index, (action, args, _, _) in enumerate(_asked(interrupt["value"])):
            call = next((c for c in unclaimed if c[1:] == (action, args)), None)
            if call is not None:
                unclaimed.remove(call)
                gate_of[call[0]] = gate_key(interrupt["id"], index)
    return gate_of


def _calls_asked(interrupts: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[CallAsked]:
    """What each action the interrupts ask about is, in order: its gate key, and its call."""
    call_of = {key: call_id for call_id, key in _gate_of_call(interrupts, messages).items()}
    asked: list[CallAsked] = []
    for interrupt in interrupts:
        for index, (action, _, _, _) in enumerate(_asked(interrupt["value"])):
            key = gate_key(interrupt["id"], index)
            asked.append((key, action, call_of.get(key)))
    return asked


def _asking_again(gates: list[Gate], *, before: Sequence[CallAsked], now: Sequence[CallAsked]) -> list[Gate]:
    """The gates an edited node raised anew, each naming the gate it asks again (asks_again): its
    new interrupt has a new id, so a new key, but it is the same gate when it asks about the same
    tool call, or, where an interrupt's action matches no call, the same action in the same place.
    The superseded request then links to the new one and keeps its place, as a native agent's."""
    old_of_call = {call: key for key, _, call in before if call is not None}
    unmatched = [(key, action) for key, action, call in before if call is None]
    again: dict[str, str] = {}
    for key, action, call in now:
        if call is not None:
            if call in old_of_call:
                again[key] = old_of_call[call]
        elif (found := next((u for u in unmatched if u[1] == action), None)) is not None:
            unmatched.remove(found)
            again[key] = found[0]
    return [replace(g, asks_again=again[g.key]) if g.key in again else g for g in gates]


def _run_once_as_gate(
    run_once: Callable[[str, Callable[[], Any]], Any],
    gate_of: dict[str, str],
    call_id: str,
    fn: Callable[[], Any],
) -> Any:
    """run_once(call_id, fn) for a tool in a resumed segment: a call a person decided on records
    its result under its gate's key, as a native agent's gated tool does, so what it did shows as
    done to reviewers and to policies (approvals.effects). Other calls keep their own id."""
    return run_once(gate_of.get(call_id, call_id), fn)


def _resume(interrupts: list[dict[str, Any]], decisions: dict[str, HumanDecision]) -> dict[str, Any]:
    """Each interrupt's resume value, in the shape it asked in."""
    resume: dict[str, Any] = {}
    for interrupt in interrupts:
        value = interrupt["value"]
        asked = _asked(value)
        chosen = [decisions[gate_key(interrupt["id"], i)] for i in range(len(asked))]
        if _is_langchain_request(value):
            resume[interrupt["id"]] = {"decisions": [_hitl(a, d) for a, d in zip(asked, chosen, strict=True)]}
        else:
            resume[interrupt["id"]] = [_inbox(a, d) for a, d in zip(asked, chosen, strict=True)]
    return resume


def _hitl(asked: Asked, decision: HumanDecision) -> dict[str, Any]:
    if decision.kind == Decision.APPROVE:
        return {"type": "approve"}
    if decision.kind == Decision.EDIT:
        return {"type": "edit", "edited_action": {"name": asked[0], "args": decision.args}}
    return {"type": "reject", "message": rejection_text(decision)}


def _inbox(asked: Asked, decision: HumanDecision) -> dict[str, Any]:
    if decision.kind == Decision.APPROVE:
        return {"type": "accept", "args": None}
    if decision.kind == Decision.EDIT:
        return {"type": "edit", "args": {"action": asked[0], "args": decision.args}}
    if decision.kind == Decision.RESPOND:
        return {"type": "response", "args": decision.message}
    return {"type": "response", "args": rejection_text(decision)}


def _question_errors(stored: list[dict[str, Any]], edited: list[dict[str, Any]]) -> dict[str, str]:
    """Before the graph has run, only the question it will be sent (the last user message's text)
    may change: it is the graph's first input."""
    if not stored:
        return {"messages": "the graph has not run yet and has no question to change"}
    last = len(stored) - 1
    same = len(edited) == len(stored) and all(
        e == s if i != last else {**e, "content": s.get("content")} == s
        for i, (e, s) in enumerate(zip(edited, stored, strict=False))
    )
    if not same or stored[last].get("role") != "user" or not isinstance(edited[last].get("content"), str):
        return {
            "messages": "the graph has not run yet: only the text of the question it will be sent can change"
        }
    if not edited[last]["content"].strip():
        return {f"messages.{last}.content": "the question cannot be empty"}
    return {}


def _comparable(message: dict[str, Any]) -> dict[str, Any]:
    """A shown message without the `edited` marks _chat adds to its calls."""
    calls = [{k: v for k, v in c.items() if k != "edited"} for c in message.get("tool_calls") or []]
    return {**message, "tool_calls": calls}


def _langchain(message: dict[str, Any]) -> BaseMessage:
    """A chat-shaped message (as the pages show it) as a LangChain message with the same id."""
    chat = _comparable(message)
    if not chat["tool_calls"]:
        del chat["tool_calls"]
    chat.setdefault("id", new_message_id())
    [converted] = convert_to_messages([chat])
    return converted


def _chat(messages: list[BaseMessage], *, before: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """LangChain messages in the chat shape the pages show, keyed by their own ids (a message the
    graph replaced, an edited tool call say, replaces the shown one). A call shown before whose
    arguments changed is marked `edited`: it ran with arguments other than those proposed."""
    proposed = {c["id"]: c["function"]["arguments"] for m in before for c in m.get("tool_calls") or []}
    shown = []
    for message, chat in zip(messages, convert_to_openai_messages(messages), strict=True):
        if not isinstance(chat, dict) or chat.get("role") == "system":
            continue
        for call in chat.get("tool_calls") or []:
            call.setdefault("type", "function")
            was, now = proposed.get(call["id"]), call["function"]["arguments"]
            if call.get("edited") or (was is not None and parse_arguments(was) != parse_arguments(now)):
                call["edited"] = True
        shown.append({**chat, "id": message.id or new_message_id()})
    return shown
