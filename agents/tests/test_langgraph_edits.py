"""An operator's edit of a LangGraph thread's conversation, as LangGraph's own update_state."""

import operator
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from agents.adapters.langgraph_agent import LangGraphAgent, _chat

pytestmark = pytest.mark.django_db(transaction=True)


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class Counter(TypedDict):
    count: int


class Appended(TypedDict):
    messages: Annotated[list[AnyMessage], operator.add]  # no ids kept: nothing to replace by


def answer(state: Chat) -> dict[str, Any]:
    return {"messages": [AIMessage(f"You said {state['messages'][-1].content}", id="a-1")]}


def bump(state: Counter) -> dict[str, Any]:
    return {"count": state.get("count", 0) + 1}


def agent_of(node: Any, schema: Any) -> LangGraphAgent:
    builder = StateGraph(schema)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    return LangGraphAgent(name="lg-edits", graph=builder)


@pytest.fixture
def chat() -> Iterator[LangGraphAgent]:
    agent = agent_of(answer, Chat)
    yield agent
    agent.saver.close()  # type: ignore[attr-defined]


def stored(agent: LangGraphAgent, thread_id: str, graph_input: Any) -> dict[str, Any]:
    """The Gatehouse state a segment would store after running the graph on graph_input."""
    config: Any = {"configurable": {"thread_id": thread_id}}
    agent.compiled.invoke(graph_input, config)
    snapshot = agent.compiled.get_state(config)
    return agent.state.model_validate(
        {
            "langgraph_thread": thread_id,
            "langgraph_checkpoint": snapshot.config["configurable"]["checkpoint_id"],
            "messages": _chat(snapshot.values["messages"], before=[]),
        }
    ).model_dump(mode="json")


def test_a_changed_message_replaces_its_original_a_removed_one_goes_and_a_new_one_is_appended(
    chat: LangGraphAgent,
) -> None:
    before = stored(chat, "lg-edit-1", {"messages": [HumanMessage("hello", id="h-1")]})
    user, reply = before["messages"]
    after = {**before, "messages": [{**user, "content": "hello there"}, {"role": "user", "content": "and?"}]}
    assert chat.edit_errors(before=before, after=after) == {}

    marked = chat.edited_state(before=before, after=after)
    assert marked == {**after, "pending_edit": True}  # the next segment writes it
    assert chat.pending_gates(chat.state.model_validate(marked), "run") == []  # nor asks what it did
    assert chat.edited_state(before=before, after=before) == before  # no change, nothing to write

    at: Any = {"configurable": {"thread_id": "lg-edit-1", "checkpoint_id": before["langgraph_checkpoint"]}}
    written = chat._write_edit(at, after["messages"])

    head: Any = {"configurable": {"thread_id": "lg-edit-1"}}
    graph = chat.compiled.get_state(head)
    assert [(type(m).__name__, m.content) for m in graph.values["messages"]] == [
        ("HumanMessage", "hello there"),
        ("HumanMessage", "and?"),
    ]
    assert graph.values["messages"][0].id == "h-1"  # replaced in place, under its id
    assert reply["id"] not in {m.id for m in graph.values["messages"]}
    assert written["configurable"]["checkpoint_id"] == graph.config["configurable"]["checkpoint_id"]
    assert written["configurable"]["checkpoint_id"] != before["langgraph_checkpoint"]
    # Written again from the same checkpoint with the conversation as it stands: nothing to write.
    assert chat._write_edit(at, before["messages"]) == at


def test_only_the_conversation_can_be_edited_and_only_once_the_graph_has_run(chat: LangGraphAgent) -> None:
    before = stored(chat, "lg-edit-2", {"messages": [HumanMessage("hello", id="h-2")]})
    moved = {**before, "langgraph_checkpoint": "elsewhere", "prompt": "hi"}
    assert set(chat.edit_errors(before=before, after=moved)) == {"langgraph_checkpoint", "prompt"}

    fresh = chat.state().model_dump(mode="json")
    errors = chat.edit_errors(before=fresh, after={**fresh, "messages": [{"role": "user", "content": "x"}]})
    assert "has not run yet" in errors["messages"]

    for odd in ({"role": "wizard", "content": "?"}, {"role": "assistant", "tool_calls": "x"}):
        broken = {**before, "messages": [*before["messages"], odd]}
        assert any(k.startswith("messages.2") for k in chat.edit_errors(before=before, after=broken))


@pytest.mark.parametrize("schema", [Counter, Appended])
def test_a_graph_without_an_add_messages_channel_refuses_a_conversation_edit(schema: Any) -> None:
    agent = agent_of(bump, schema)
    try:
        before = agent.state.model_validate({"langgraph_checkpoint": "c-1"}).model_dump(mode="json")
        after = {**before, "messages": [{"role": "user", "content": "x"}]}
        assert "reduced by add_messages" in agent.edit_errors(before=before, after=after)["messages"]
    finally:
        agent.saver.close()  # type: ignore[attr-defined]


def test_before_the_graph_has_run_only_the_question_changes_and_becomes_its_input(
    chat: LangGraphAgent,
) -> None:
    question = {"id": "m-1", "role": "user", "content": "Refund ORD-1001"}
    before = chat.state.model_validate({"messages": [question], "prompt": "Refund ORD-1001"}).model_dump(
        mode="json"
    )
    asked = {**before, "messages": [{**question, "content": "Refund ORD-1003"}]}
    assert chat.edit_errors(before=before, after=asked) == {}
    assert chat.edited_state(before=before, after=asked)["prompt"] == "Refund ORD-1003"  # sent first

    added = {**before, "messages": [question, {"role": "user", "content": "and ORD-1002"}]}
    assert "only the text of the question" in chat.edit_errors(before=before, after=added)["messages"]
    recast = {**before, "messages": [{**question, "role": "assistant"}]}
    assert "only the text of the question" in chat.edit_errors(before=before, after=recast)["messages"]
    blank = {**before, "messages": [{**question, "content": " "}]}
    assert chat.edit_errors(before=before, after=blank) == {
        "messages.0.content": "the question cannot be empty"
    }


def test_a_compiled_graph_is_taken_too_and_recompiled_onto_gatehouses_saver() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from checkpoints.langgraph import GatehouseSaver

    builder = StateGraph(Chat)
    builder.add_node("node", answer)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    agent = LangGraphAgent(name="lg-edits", graph=builder.compile(checkpointer=InMemorySaver()))
    try:
        assert isinstance(agent.compiled.checkpointer, GatehouseSaver)
        values = stored(agent, "lg-compiled-1", {"messages": [HumanMessage("hi", id="h-1")]})
        assert [m["content"] for m in values["messages"]] == ["hi", "You said hi"]
    finally:
        agent.saver.close()  # type: ignore[attr-defined]
