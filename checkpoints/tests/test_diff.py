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


def call_with(arguments: str) -> dict[str, Any]:
    call = {**CALL, "function": {**CALL["function"], "arguments": arguments}}
    return {"messages": [{"role": "assistant", "content": None, "tool_calls": [call]}]}


def test_changed_arguments_name_the_argument_that_changed() -> None:
    old = call_with('{"order_id": "ORD-1001", "amount_cents": 4250}')
    new = call_with('{"order_id": "ORD-1001", "amount_cents": 3000, "note": "partial"}')

    changes = [(c.kind, c.path, c.old, c.new) for c in diff_values(old, new)]

    assert changes == [
        ("changed", "messages[0].tool_calls[0].function.arguments.amount_cents", 4250, 3000),
        ("added", "messages[0].tool_calls[0].function.arguments.note", None, "partial"),
    ]


def test_arguments_that_only_change_spelling_or_are_not_objects_stay_one_change_of_the_text() -> None:
    for before, after in [
        ('{"a": 1, "b": 2}', '{"b": 2,  "a": 1}'),  # the same object, written differently
        ('{"a": 1}', "not json {"),
        ("[1]", "[2]"),
    ]:
        [change] = diff_values(call_with(before), call_with(after))

        assert (change.path, change.old, change.new) == (
            "messages[0].tool_calls[0].function.arguments",
            before,
            after,
        )


def test_a_changed_tool_result_names_its_fields_and_a_persons_words_stay_text() -> None:
    def state(role: str, content: str) -> dict[str, Any]:
        return {"messages": [{"role": role, "tool_call_id": "c1", "content": content}]}

    result = diff_values(
        state("tool", '{"status": "ok", "total": 1}'), state("tool", '{"status": "ok", "total": 2}')
    )
    typed = diff_values(state("user", '{"total": 1}'), state("user", '{"total": 2}'))

    assert [(c.path, c.old, c.new) for c in result] == [("messages[0].content.total", 1, 2)]
    assert [(c.path, c.old, c.new) for c in typed] == [
        ("messages[0].content", '{"total": 1}', '{"total": 2}')
    ]


def test_keys_that_are_digits_beside_names_sort_without_error() -> None:
    # A tool's result may hold {"0": …, "a": …}; "²" is a digit that int() refuses.
    old = {"0": {"a": 1, "0": 1, "²": 1}, "b": 1}
    new = {"0": {"a": 2, "0": 2, "²": 2}, "b": 2}

    assert [c.path for c in diff_values(old, new)] == ["0.0", "0.a", "0.²", "b"]


def test_a_key_holding_both_quote_marks_or_dots_is_named_as_it_is() -> None:
    # DeepDiff spells such a key root["a'b\"c"]: parsed back, it named a key that is not there.
    key = "a'b\"c.d"
    old = {"messages": [{"role": "user", key: "1"}], "o'k": {"x y": 1}}
    new = {"messages": [{"role": "user", key: "2"}], "o'k": {"x y": 2}}

    changes = diff_values(old, new)

    assert [(c.kind, c.path, c.old, c.new) for c in changes] == [
        ("changed", f"messages[0].{key}", "1", "2"),
        ("changed", "o'k.x y", 1, 2),
    ]
