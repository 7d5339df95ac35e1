"""Text a model writes that no column can store: a lone UTF-16 surrogate ("\\ud800", valid JSON
text) in a reply's content, a tool call's arguments, name or id. A model can be steered to
write it; before, storing the step's checkpoint or the gate's request raised
UnicodeEncodeError (both databases) and the step failed. Now the call's arguments are refused
like arguments failing the tool's schema (the model is told why, no gate opens) and other text
is stored with the surrogate replaced (U+FFFD)."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pytest_django.fixtures import Settings

from agents.messages import message_errors
from checkpoints.models import Thread
from tests.live import start_thread
from tests.test_security_audit_gate import (
    HostileModel,
    pending,
    refund_call,
    refunds,
    says,
    step,
    thread_values,
)

pytestmark = pytest.mark.django_db(transaction=True)

SURROGATE = "\ud800"


@pytest.fixture
def model(settings: Settings, steps_sent: list[tuple[str, str]]) -> Iterator[HostileModel]:
    """Steps ask a scripted model over real HTTP (the openai SDK's path)."""
    server = HostileModel()
    settings.OPENAI_BASE_URL = server.url
    settings.OPENAI_API_KEY = "test"
    settings.OFFLINE_MODEL = False
    yield server
    server.close()


def tool_results(thread_id: str) -> list[str]:
    return [m["content"] for m in thread_values(thread_id)["messages"] if m.get("role") == "tool"]


@pytest.mark.parametrize(
    "arguments",
    [
        json.dumps({"order_id": "ORD-1001" + SURROGATE, "amount_cents": 500}),  # the escape, ASCII text
        json.dumps({"order_id": "ORD-1001", "amount_cents": 500, "note" + SURROGATE: 1}),  # in a key
        '{"order_id": "ORD-1001' + SURROGATE + '", "amount_cents": 500}',  # the character itself
    ],
)
def test_arguments_holding_a_lone_surrogate_are_refused_and_the_model_told_why(
    model: HostileModel, arguments: str
) -> None:
    call = refund_call("call_1", 500)
    call["function"]["arguments"] = arguments
    model.replies += [says(call), says(content="Done.")]
    thread_id = start_thread("Please refund order ORD-1001")

    assert step(thread_id) == "running"  # no gate: the call is answered with an error
    assert pending(thread_id) == []
    assert step(thread_id) == "running"
    assert refunds(thread_id) == []
    (result,) = tool_results(thread_id)
    assert result.startswith("Error: Invalid arguments for issue_refund") and "surrogate" in result
    assert message_errors(thread_values(thread_id)["messages"]) == {}


def test_content_holding_a_lone_surrogate_is_stored_with_it_replaced(model: HostileModel) -> None:
    model.replies += [says(content="Done " + SURROGATE + " here.")]
    thread_id = start_thread("Please refund order ORD-1001")

    assert step(thread_id) == "done"
    last = thread_values(thread_id)["messages"][-1]
    assert last["content"] == "Done \ufffd here."


@pytest.mark.parametrize("part", ["name", "id"])
def test_a_call_name_or_id_holding_a_lone_surrogate_fails_nothing(model: HostileModel, part: str) -> None:
    call: dict[str, Any] = refund_call("call_1", 500)
    if part == "name":
        call["function"]["name"] = "issue_refund" + SURROGATE
    else:
        call["id"] = "call_" + SURROGATE
    model.replies += [says(call), says(content="Done.")]
    thread_id = start_thread("Please refund order ORD-1001")

    if part == "name":
        assert step(thread_id) == "running"  # no such tool: no gate
        assert step(thread_id) == "running"  # the call is answered with an error
        (result,) = tool_results(thread_id)
        assert result.startswith("Error: there is no tool named") and SURROGATE not in result
    else:
        assert step(thread_id) == "waiting"  # asked under an id a gate can key
        (request_,) = pending(thread_id)
        assert SURROGATE not in request_.key
    assert refunds(thread_id) == []
    assert message_errors(thread_values(thread_id)["messages"]) == {}


@pytest.fixture
def framework_model(model: HostileModel, monkeypatch: pytest.MonkeyPatch) -> HostileModel:
    """The scripted model behind the pydantic-ai example too, whose client is built at import."""
    from agents.examples import refunds_pydantic_ai

    monkeypatch.setattr(refunds_pydantic_ai.model.client, "base_url", model.url + "/")
    return model


def test_a_framework_agents_reply_holding_a_lone_surrogate_fails_nothing(
    framework_model: HostileModel,
) -> None:
    """pydantic-ai refuses the arguments to the model as a native tool does (no gate opens) and
    stores its text with the surrogate replaced; before, its next request failed encoding them."""
    call = refund_call("call_1", 500)
    call["function"]["arguments"] = json.dumps({"order_id": "ORD-1001" + SURROGATE, "amount_cents": 500})
    framework_model.replies += [says(call, content="On it " + SURROGATE), says(content="Done " + SURROGATE)]
    thread_id = start_thread("Please refund order ORD-1001", agent="refunds_pydantic_ai")

    statuses = [step(thread_id)]
    while statuses[-1] == "running":
        statuses.append(step(thread_id))
    assert statuses[-1] == "done", statuses
    assert pending(thread_id) == [] and refunds(thread_id) == []
    (result,) = tool_results(thread_id)  # pydantic-ai returns a retry as the call's result
    assert result.startswith("Invalid arguments for issue_refund") and "surrogate" in result
    messages = thread_values(thread_id)["messages"]
    assert [m["content"] for m in messages if m["role"] == "assistant"] == ["On it \ufffd", "Done \ufffd"]
    assert message_errors(messages) == {}


def test_the_openai_agents_sdk_fails_the_step_saying_why(framework_model: HostileModel) -> None:
    """The SDK hashes a call's parsed arguments (UnicodeEncodeError before) and asks for a gated
    call's approval before reading them: it has no way to refuse them to the model, so the step
    fails saying why, and nothing ran."""
    call = refund_call("call_1", 500)
    call["function"]["arguments"] = json.dumps({"order_id": "ORD-1001" + SURROGATE, "amount_cents": 500})
    framework_model.replies += [says(call, content="On it"), says(content="Done.")]
    thread_id = start_thread("Please refund order ORD-1001", agent="refunds_openai_agents")

    assert step(thread_id) == "failed"
    error = Thread.objects.get(pk=thread_id).error
    assert error.startswith(
        "UnstorableArguments: The arguments cannot be stored: order_id contains a lone surrogate"
    )
    assert "'issue_refund'" in error and SURROGATE not in error
    assert pending(thread_id) == [] and refunds(thread_id) == []


@pytest.mark.parametrize("agent", ["refunds_openai_agents", "refunds_pydantic_ai"])
def test_a_framework_agents_text_holding_a_lone_surrogate_is_stored_with_it_replaced(
    framework_model: HostileModel, agent: str
) -> None:
    call = refund_call("call_" + SURROGATE, 500)
    call["function"]["name"] = "lookup_order"
    call["function"]["arguments"] = json.dumps({"order_id": "ORD-1001"})
    framework_model.replies += [says(call, content="Looking " + SURROGATE), says(content="Done " + SURROGATE)]
    thread_id = start_thread("Please refund order ORD-1001", agent=agent)

    statuses = [step(thread_id)]
    while statuses[-1] == "running":
        statuses.append(step(thread_id))
    assert statuses[-1] == "done", statuses
    messages = thread_values(thread_id)["messages"]
    assert messages[-1]["content"] == "Done \ufffd"
    assert "Looking \ufffd" in [m["content"] for m in messages if m["role"] == "assistant"]
    assert message_errors(messages) == {}
