"""What the adapters for other agent frameworks share: a framework runs a whole *segment* of a
run (to its end, or to the calls that wait for a person) as one Gatehouse step, in one node."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from agents.graph import Agent, Retention, Step, StepContext
from agents.state import State, add_messages, new_message_id
from agents.tools import ToolContext

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
