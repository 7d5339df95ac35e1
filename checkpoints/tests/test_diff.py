import json
from typing import Any

from checkpoints.diff import diff_values

CALL: dict[str, Any] = {"id": "c1", "type": "function", "function": {"name": "issue_refund", "arguments": ""}}


def added_call(arguments: str) -> dict[str, Any]:
    call = {**CALL, "function": {**CALL["function"], "arguments": arguments}}
    old = {"messages": [{"role": "user", "content": "Refund ORD-1001"}]}
    new = {"messages": [*old["messages"], {"role": "assistant", "content": None, "tool_calls": [call]}]}
    [change] = diff_values(old, new)
    assert change.kind == "added"
    return {"shown": json.loads(change.new_text), "kept": change.new}


def test_an_added_tool_call_shows_its_arguments_as_the_object_they_encode() -> None:
    change = added_call('{"order_id": "ORD-1001", "amount_cents": 4250}')

    shown = change["shown"]["tool_calls"][0]["function"]["arguments"]
    assert shown == {"order_id": "ORD-1001", "amount_cents": 4250}  # not an escaped string
    # Only the text is readable: the change itself keeps the state as it is stored.
    assert (
        change["kept"]["tool_calls"][0]["function"]["arguments"]
        == '{"order_id": "ORD-1001", "amount_cents": 4250}'
    )


def test_arguments_that_are_not_a_json_object_are_shown_as_they_are() -> None:
    for raw in ("not json {", "[1, 2]", ""):
        assert added_call(raw)["shown"]["tool_calls"][0]["function"]["arguments"] == raw


def test_a_tool_result_shows_the_object_it_encodes() -> None:
    old: dict[str, Any] = {"messages": []}
    result = {
        "role": "tool",
        "tool_call_id": "c1",
        "content": '{"order_id": "ORD-1001", "total_cents": 4250}',
    }
    plain = {"role": "user", "content": '{"order_id": "ORD-1001"}'}  # a person's words stay as typed

    shown = [json.loads(c.new_text) for c in diff_values(old, {"messages": [result, plain]})]

    assert shown[0]["content"] == {"order_id": "ORD-1001", "total_cents": 4250}
    assert shown[1]["content"] == '{"order_id": "ORD-1001"}'
