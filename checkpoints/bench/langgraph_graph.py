"""A LangGraph tool-calling conversation with no model: each turn the assistant calls a tool
and the tool answers with ~1 KB. Used by bench_langgraph and the saver's tests."""

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

RESULT = ("order 4821 shipped on 2026-11-02 via DHL, tracking JD0146000032; " * 16)[:1000]


class Conversation(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turn: int


def assistant(state: Conversation) -> dict[str, Any]:
    turn = state.get("turn", 0) + 1
    call = {"name": "lookup_order", "args": {"order_id": f"A-{turn}"}, "id": f"call-{turn}"}
    return {
        "messages": [AIMessage(content=f"Let me look up order A-{turn}.", tool_calls=[call])],
        "turn": turn,
    }


def tool(state: Conversation) -> dict[str, Any]:
    call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
    return {
        "messages": [ToolMessage(content=f"{call['args']['order_id']}: {RESULT}", tool_call_id=call["id"])]
    }


def conversation_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """One turn per invoke: input, assistant, tool (four checkpoints: the input's, then one per step)."""
    builder = StateGraph(Conversation)
    builder.add_node("assistant", assistant)
    builder.add_node("tool", tool)
    builder.add_edge(START, "assistant")
    builder.add_edge("assistant", "tool")
    builder.add_edge("tool", END)
    return builder.compile(checkpointer=checkpointer)
