"""What the adapters for other agent frameworks share: a framework runs a whole *segment* of a
run (to its end, or to the calls that wait for a person) as one Gatehouse step, in one node."""

import json
import sysconfig
import types
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Annotated, Any

from django.db import connections

from agents.gates import HumanDecision
from agents.graph import Agent, Gate, Retention, Step, StepContext
from agents.prebuilt import approval_errors
from agents.runtime import RETRYABLE, EffectWithdrawn
from agents.state import State, add_messages, new_message_id
from agents.tools import Approval, Decision, ToolContext

NODE = "run"


@dataclass(frozen=True)
class GatehouseDeps:
    """Where a framework's tool runs, for its side effects: pydantic-ai passes it as `ctx.deps`,
    a LangGraph node reads it with `gatehouse_step()`."""

    thread_id: str
    checkpoint_id: str
    run_once: Callable[[str, Callable[[], Any]], Any]
    """run_once(tool_call_id, fn): fn's result, computed at most once for this call."""

    @classmethod
    def of(cls, ctx: StepContext) -> "GatehouseDeps":
        return cls(thread_id=ctx.thread_id, checkpoint_id=ctx.checkpoint_id, run_once=ctx.run_once)

    def idempotency_key(self, tool_call_id: str) -> str:
        """Stable across retries of the step (a native tool's key): send it where the effect lands."""
        return ToolContext(self.thread_id, self.checkpoint_id, tool_call_id).idempotency_key


class RuntimeErrors:
    """Keeps the first error a framework's tool raised that the runtime must see: a database
    error (the step's side effect rolled back; the step retries) or a withdrawn effect (a cancel
    came first). A framework that hands tool errors to the model, as the OpenAI Agents SDK does,
    would turn it into text the model reads and go on; the segment raises it after the run."""

    KINDS: tuple[type[BaseException], ...] = (*RETRYABLE, EffectWithdrawn)

    def __init__(self) -> None:
        self.error: BaseException | None = None

    def keep(self, error: BaseException | None) -> None:
        if isinstance(error, self.KINDS) and self.error is None:
            self.error = error

    def watching(self, deps: GatehouseDeps) -> GatehouseDeps:
        """`deps` whose run_once keeps such an error (whatever the tool then does with it)."""

        def run_once(tool_call_id: str, fn: Callable[[], Any]) -> Any:
            try:
                return deps.run_once(tool_call_id, fn)
            except BaseException as exc:
                self.keep(exc)
                raise

        return replace(deps, run_once=run_once)

    def raise_kept(self) -> None:
        if self.error is not None:
            raise self.error


class SegmentState(State):
    messages: Annotated[list[dict[str, Any]], add_messages] = []
    """The conversation as the pages show it (the chat shape native agents store)."""
    prompt: str = ""
    """A person's message the next segment has yet to send."""


class SegmentAgent(Agent):
    """An agent whose framework runs a segment per step (`run_segment`, the only node)."""

    def __init__(
        self, *, name: str, state: type[SegmentState], description: str, retention: Retention | None
    ) -> None:
        super().__init__(
            name=name,
            state=state,
            nodes={NODE: self.run_segment},
            start=NODE,
            description=description,
            retention=retention or Retention(),
        )

    def input_update(self, text: str) -> dict[str, Any]:
        return {"messages": [{"id": new_message_id(), "role": "user", "content": text}], "prompt": text}

    def run_segment(self, state: Any, ctx: StepContext) -> Step:
        raise NotImplementedError


class GatedToolsAgent(SegmentAgent):
    """A segment agent over a framework's agent (pydantic-ai, the OpenAI Agents SDK) whose tools
    that need approval are named in `gates`, each with its queue, decisions and wording."""

    state_type: type[SegmentState]
    """What a checkpoint of the framework's runs holds."""

    def __init__(
        self,
        *,
        name: str,
        agent: Any,
        gates: dict[str, Approval],
        description: str = "",
        retention: Retention | None = None,
    ) -> None:
        super().__init__(name=name, state=self.state_type, description=description, retention=retention)
        self.agent = agent
        self.gates = gates

    # The gate protocol: what is gated, and each call's gate.
    def approval_for(self, action: str) -> Approval | None:
        return self.gates.get(action)

    def approvals(self) -> list[Approval]:
        return list(self.gates.values())

    def gated_actions(self) -> frozenset[str]:
        return frozenset(self.gates)

    def definition_errors(self) -> list[str]:
        errors = super().definition_errors()
        for action, approval in self.gates.items():
            errors += approval_errors(approval, where=f"gate {action!r}")
        return errors

    def gate(self, *, key: str, action: str, args: Any) -> Gate:
        """The gate of a call of the gated tool `action`, its arguments as the tool reads them."""
        checked = self.checked_args(action, args)
        approval = self.gates[action]
        return Gate(
            key=key, action=action, args=checked, approval=approval, description=approval.describe(checked)
        )


class ClosingThreads(ThreadPoolExecutor):
    """Runs a framework's sync tools (pydantic-ai and the OpenAI Agents SDK send them to threads);
    each call gives back the database connection it opened, so no tool thread holds one after."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        def call() -> Any:
            try:
                return fn(*args, **kwargs)
            finally:
                connections.close_all()

        return super().submit(call)


def objects_used_by(function: Any, *, kind: type) -> list[Any]:
    """The `kind` objects (another framework agent) that `function`, a tool's body, names: its
    globals, its closure, and so again in the functions of your own code it names (not a
    library's). A tool that runs such an agent (`other.run(...)`, `Runner.run(other, ...)`) runs
    that agent's tools where no gate stands: the adapters refuse those that need a person."""
    found: dict[int, Any] = {}
    seen: set[int] = set()
    todo = [function]
    while todo:
        fn = todo.pop()
        fn = getattr(fn, "__func__", fn)  # a bound method's function
        if not isinstance(fn, types.FunctionType) or id(fn) in seen or _a_library(fn):
            continue
        seen.add(id(fn))
        used = [fn.__globals__.get(name) for name in _names(fn.__code__)]
        used += [cell.cell_contents for cell in fn.__closure__ or () if _filled(cell)]
        for value in used:
            if isinstance(value, kind):
                found.setdefault(id(value), value)
            elif isinstance(value, types.FunctionType | types.MethodType):
                todo.append(value)
    return list(found.values())


def _names(code: types.CodeType) -> set[str]:
    """The global names `code` reads, its nested functions' (lambdas, comprehensions) included."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _a_library(fn: types.FunctionType) -> bool:
    """Whether `fn` is an installed package's (whose agents, if any, are not this project's)."""
    return any(fn.__code__.co_filename.startswith(p) for p in _LIBRARIES)


_LIBRARIES = tuple({sysconfig.get_path(p) for p in ("stdlib", "platstdlib", "purelib", "platlib")})


def edited_calls(messages: list[dict[str, Any]], decisions: dict[str, HumanDecision]) -> list[dict[str, Any]]:
    """The shown messages whose calls a reviewer edited, rewritten in place (same id)."""
    edits = {k: d.args for k, d in decisions.items() if d.kind == Decision.EDIT}
    rewritten = []
    for message in messages:
        calls = message.get("tool_calls") or []
        if not any(c.get("id") in edits for c in calls):
            continue
        calls = [
            {**c, "function": {**c["function"], "arguments": json.dumps(edits[c["id"]])}, "edited": True}
            if c.get("id") in edits
            else c
            for c in calls
        ]
        rewritten.append({**message, "tool_calls": calls})
    return rewritten


def dropped_fields(given: Any, kept: Any, *, path: tuple[str, ...] = ()) -> dict[str, str]:
    """The keys of `given` (arguments as a reviewer sent them) that validation dropped from `kept`
    (their validated dump, by alias), each with a sentence: a nested model ignores unknown keys,
    so a misspelt field of an edit would otherwise vanish, the tool running without the change."""
    if isinstance(given, list) and isinstance(kept, list) and len(given) == len(kept):
        return {
            where: text
            for i, (g, k) in enumerate(zip(given, kept, strict=True))
            for where, text in dropped_fields(g, k, path=(*path, str(i))).items()
        }
    if not (isinstance(given, dict) and isinstance(kept, dict)):
        return {}
    dropped: dict[str, str] = {}
    for key, value in given.items():
        where = (*path, str(key))
        if key not in kept:
            of = f" of {path[-1].replace('_', ' ')}" if path else ""
            dropped[".".join(where)] = f"{str(key).replace('_', ' ').capitalize()} is not a field{of}"
        else:
            dropped |= dropped_fields(value, kept[key], path=where)
    return dropped
