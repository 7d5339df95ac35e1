"""How agents are declared: tools from typed functions, typed state with reducers, the registry
and the startup checks that reject bad definitions."""

import datetime
import decimal
import enum
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings
from pydantic import BaseModel, Field, ValidationError

from agents.checks import check_agents
from agents.graph import Agent, Step, StepContext
from agents.prebuilt import ToolAgent
from agents.registry import AgentRegistry, UnknownAgent, registry
from agents.state import State, add_messages, append, replace
from agents.tools import Approval, Decision, Expiry, ToolArgumentsError, ToolContext, tool

# --- Tools --------------------------------------------------------------------------------


@tool(approval=Approval(queue="refunds", description="Refund {amount_cents} on {order_id}"))
def refund(
    order_id: str,
    amount_cents: Annotated[int, Field(gt=0, le=100_000, description="Amount in cents")],
    ctx: ToolContext,
    note: str = "",
) -> dict[str, Any]:
    """Refund an order."""
    return {"order_id": order_id, "amount_cents": amount_cents, "note": note, "key": ctx.idempotency_key}


@tool
def lookup(order_id: str) -> str:
    """Look up an order."""
    return order_id


def test_tool_schema_types_come_from_the_signature() -> None:
    properties = refund.args_schema()["properties"]

    assert properties["order_id"]["type"] == "string"
    assert properties["amount_cents"]["type"] == "integer"
    assert properties["note"]["type"] == "string"


def test_tool_schema_requires_parameters_without_defaults() -> None:
    schema = refund.args_schema()

    assert schema["required"] == ["order_id", "amount_cents"]
    assert schema["properties"]["note"]["default"] == ""


def test_tool_schema_carries_annotated_field_constraints() -> None:
    amount = refund.args_schema()["properties"]["amount_cents"]

    assert amount["exclusiveMinimum"] == 0
    assert amount["maximum"] == 100_000
    assert amount["description"] == "Amount in cents"


def test_tool_schema_leaves_out_the_tool_context_parameter() -> None:
    assert "ctx" not in refund.args_schema()["properties"]
    assert refund.context_param == "ctx"
    assert lookup.context_param == ""


def test_tool_schema_forbids_extra_arguments() -> None:
    assert refund.args_schema()["additionalProperties"] is False


def test_openai_schema_names_the_tool_and_uses_its_docstring() -> None:
    schema = refund.openai_schema()

    assert schema["type"] == "function"
    assert schema["function"]["name"] == "refund"
    assert schema["function"]["description"] == "Refund an order."
    assert schema["function"]["parameters"] == refund.args_schema()


def test_tool_name_can_be_given_explicitly() -> None:
    named = tool(name="find_order")(lookup.fn)

    assert named.name == "find_order"


def test_a_parameter_without_annotation_raises_type_error_naming_tool_and_parameter() -> None:
    def untyped(order_id: str, amount):
        return amount

    with pytest.raises(TypeError, match=r"'untyped'.*'amount'"):
        tool(untyped)


def test_validate_args_coerces_to_the_schema() -> None:
    assert refund.validate_args({"order_id": "ORD-1", "amount_cents": "250"}) == {
        "order_id": "ORD-1",
        "amount_cents": 250,
        "note": "",
    }


def test_validate_args_accepts_a_json_string() -> None:
    assert lookup.validate_args('{"order_id": "ORD-1"}') == {"order_id": "ORD-1"}


def test_validate_args_reports_errors_by_field_name() -> None:
    with pytest.raises(ToolArgumentsError) as excinfo:
        refund.validate_args({"amount_cents": 0})

    assert set(excinfo.value.errors) == {"order_id", "amount_cents"}
    assert "greater than 0" in excinfo.value.errors["amount_cents"]
    assert "refund" in str(excinfo.value)


def test_validate_args_rejects_unknown_fields() -> None:
    with pytest.raises(ToolArgumentsError) as excinfo:
        lookup.validate_args({"order_id": "ORD-1", "surprise": True})

    assert list(excinfo.value.errors) == ["surprise"]


def test_validate_args_rejects_invalid_json() -> None:
    with pytest.raises(ToolArgumentsError) as excinfo:
        lookup.validate_args('{"order_id": ')

    assert "not valid JSON" in excinfo.value.errors["__all__"]


def test_validate_args_rejects_json_that_is_not_an_object() -> None:
    with pytest.raises(ToolArgumentsError) as excinfo:
        lookup.validate_args("[1, 2]")

    assert list(excinfo.value.errors) == ["__all__"]


def test_invoke_passes_the_context_to_tools_that_want_it() -> None:
    context = ToolContext(thread_id="t1", checkpoint_id="c1", tool_call_id="call_1")

    result = refund.invoke({"order_id": "ORD-1", "amount_cents": 5}, context=context)

    assert result["key"] == "t1:c1:call_1"


def test_invoke_gives_a_tool_its_arguments_as_its_signature_types_them() -> None:
    class Size(enum.Enum):
        SMALL = "small"

    class Address(BaseModel):
        city: str

    @tool
    def ship(
        on: datetime.date,
        cost: decimal.Decimal,
        size: Size,
        to: Address,
        tags: set[str],
        context: ToolContext,
    ) -> dict[str, Any]:
        """Ship an order."""
        return {
            "weekday": on.weekday(),
            "cost": cost + 1,
            "size": size.value,
            "city": to.city,
            "n": len(tags),
        }

    stored = {"on": "2026-11-30", "cost": "9.50", "size": "small", "to": {"city": "Oslo"}, "tags": ["a", "a"]}
    context = ToolContext(thread_id="t1", checkpoint_id="c1", tool_call_id="call_1")

    # As stored (JSON), read back through the schema; the context under its own parameter name.
    assert ship.invoke(stored, context=context) == {
        "weekday": 0,
        "cost": decimal.Decimal("10.50"),
        "size": "small",
        "city": "Oslo",
        "n": 1,
    }
    assert ship.validate_args(stored)["on"] == "2026-11-30"  # what gates and edits keep: JSON


def star_args(*orders: str) -> None: ...


def star_kwargs(**orders: str) -> None: ...


def positional_only(order: str, /) -> None: ...


@pytest.mark.parametrize("fn", [star_args, star_kwargs, positional_only])
def test_a_tool_parameter_it_could_not_be_called_with_by_name_raises_type_error(fn: Any) -> None:
    with pytest.raises(TypeError, match="must be a named parameter"):
        tool(fn)


def test_a_template_that_cannot_format_an_argument_falls_back_instead_of_raising() -> None:
    approval = Approval(summary="Note {note:.40}", description="Note {note:.40} for {order_id}")

    assert approval.summarize({"note": None}) == ""  # the inbox then shows the generic line
    assert approval.describe({"note": None}) == "Note {note:.40} for {order_id}"


@pytest.mark.parametrize("after_s", [float("nan"), float("inf"), 10**12, 0, -1])
def test_an_expiry_that_no_deadline_could_hold_is_refused_where_it_is_declared(after_s: float) -> None:
    with pytest.raises(ValueError, match="at most 315,360,000"):
        Expiry(after_s)


# --- State --------------------------------------------------------------------------------


class Notes(State):
    title: str = ""
    tags: Annotated[list[str], append] = []
    messages: Annotated[list[dict[str, Any]], add_messages] = []


def message(id: str, content: str) -> dict[str, Any]:
    return {"id": id, "role": "user", "content": content}


def test_reducers_come_from_annotations_with_replace_by_default() -> None:
    assert Notes.reducers() == {"title": replace, "tags": append, "messages": add_messages}


def test_apply_replaces_a_plain_field() -> None:
    assert Notes.apply({"title": "old", "tags": [], "messages": []}, {"title": "new"})["title"] == "new"


def test_apply_appends_to_an_append_field() -> None:
    assert Notes.apply({"title": "", "tags": ["a"], "messages": []}, {"tags": ["b"]})["tags"] == ["a", "b"]


def test_add_messages_replaces_a_message_with_the_same_id_in_place() -> None:
    values = {"messages": [message("m1", "hi"), message("m2", "draft")]}

    merged = Notes.apply(values, {"messages": [message("m1", "hello")]})

    assert merged["messages"] == [message("m1", "hello"), message("m2", "draft")]


def test_add_messages_appends_new_messages() -> None:
    merged = Notes.apply({"messages": [message("m1", "hi")]}, {"messages": [message("m2", "there")]})

    assert [m["id"] for m in merged["messages"]] == ["m1", "m2"]


def test_add_messages_gives_a_message_without_id_a_fresh_one() -> None:
    merged = Notes.apply({"messages": []}, {"messages": [{"role": "user", "content": "hi"}]})

    assert merged["messages"][0]["id"].startswith("msg_")


def test_apply_rejects_an_update_field_the_state_does_not_declare() -> None:
    with pytest.raises(ValueError, match="surprise"):
        Notes.apply({}, {"surprise": 1})


def test_apply_validates_the_result() -> None:
    with pytest.raises(ValidationError):
        Notes.apply({}, {"title": ["not", "a", "string"]})


def rename_username(values: dict[str, Any]) -> dict[str, Any]:
    return {"name": values["username"]}


def add_email(values: dict[str, Any]) -> dict[str, Any]:
    return {**values, "email": ""}


class Profile(State):
    schema_version = 3
    upgrades = {1: rename_username, 2: add_email}
    name: str
    email: str


def test_upgrade_applies_each_upgrade_in_order() -> None:
    assert Profile.upgrade({"username": "ada"}, from_version=1) == {"name": "ada", "email": ""}


def test_upgrade_from_the_current_version_changes_nothing() -> None:
    assert Profile.upgrade({"name": "ada", "email": "a@x"}, from_version=3) == {"name": "ada", "email": "a@x"}


def test_upgrade_without_an_upgrade_function_names_the_missing_version() -> None:
    class Gappy(State):
        schema_version = 3
        upgrades = {1: lambda values: values}

    with pytest.raises(ValueError, match="Gappy has no upgrade from schema version 2 to 3"):
        Gappy.upgrade({}, from_version=1)


def test_a_state_version_without_an_upgrade_from_each_older_version_fails_the_check() -> None:
    class Gappy(State):
        schema_version = 3
        upgrades = {1: lambda values: values}

    agent = Agent(name="gappy", state=Gappy, nodes={"echo": echo}, start="echo")

    assert agent.definition_errors() == ["state schema_version 3 has no upgrades[2] (from version 2 to 3)"]


# --- Registry -----------------------------------------------------------------------------


class Chat(State):
    messages: Annotated[list[dict[str, Any]], add_messages] = []


def echo(state: Any, ctx: StepContext) -> Step:
    return Step(update={})


def plain_agent(name: str = "echo", **fields: Any) -> Agent:
    return Agent(
        name=name,
        state=fields.pop("state", Chat),
        nodes=fields.pop("nodes", {"echo": echo}),
        start=fields.pop("start", "echo"),
    )


def test_register_returns_the_agent_and_get_finds_it() -> None:
    agents = AgentRegistry()
    agent = plain_agent()

    assert agents.register(agent) is agent
    assert agents.get("echo") is agent


def test_registering_the_same_agent_twice_is_harmless() -> None:
    agents = AgentRegistry()
    agent = plain_agent()
    agents.register(agent)

    agents.register(agent)

    assert agents.names() == ["echo"]


def test_registering_a_second_agent_under_a_taken_name_raises_improperly_configured() -> None:
    agents = AgentRegistry()
    agents.register(plain_agent())

    with pytest.raises(ImproperlyConfigured, match="'echo' is already registered"):
        agents.register(plain_agent())


def test_registering_something_that_is_not_an_agent_raises_improperly_configured() -> None:
    with pytest.raises(ImproperlyConfigured, match="dict"):
        AgentRegistry().register({"name": "echo"})  # type: ignore[arg-type]


def test_get_of_an_unknown_agent_lists_the_known_names() -> None:
    agents = AgentRegistry()
    agents.register(plain_agent("echo"))
    agents.register(plain_agent("alpha"))

    with pytest.raises(UnknownAgent, match=r"'nope'.*alpha, echo") as excinfo:
        agents.get("nope")

    assert excinfo.value.name == "nope"


def test_the_shipped_agents_are_discovered_at_startup() -> None:
    assert {"refunds", "outreach"} <= set(registry.names())


# --- Startup checks -----------------------------------------------------------------------


@pytest.fixture
def register_temporarily() -> Iterator[Any]:
    """Register agents in the global registry for one test, then remove them."""
    added: list[str] = []

    def add(agent: Agent) -> Agent:
        registry.register(agent)
        added.append(agent.name)
        return agent

    yield add
    for name in added:
        registry.unregister(name)


def problems_of(name: str) -> list[str]:
    """The agents.E001 messages `manage.py check` reports for one agent."""
    return [
        message.msg
        for message in run_checks(tags=["agents"])
        if message.id == "agents.E001" and message.obj.name == name
    ]


class PlainMessages(State):
    messages: list[dict[str, Any]] = []


class NoMessages(State):
    title: str = ""


def test_the_shipped_agents_pass_the_checks() -> None:
    assert problems_of("refunds") == []
    assert problems_of("outreach") == []
    assert registry.get("refunds").definition_errors() == []
    assert registry.get("outreach").definition_errors() == []


def test_a_good_agent_passes_the_checks(register_temporarily: Any) -> None:
    register_temporarily(ToolAgent(name="good-agent", state=Chat, tools=[lookup, refund]))

    assert problems_of("good-agent") == []


def test_check_reports_a_bad_agent_name(register_temporarily: Any) -> None:
    register_temporarily(plain_agent("Bad Name"))

    assert problems_of("Bad Name") == [
        "Agent 'Bad Name': name 'Bad Name' must be lowercase letters, digits, '-' or '_'"
    ]


def test_check_reports_a_missing_start_node(register_temporarily: Any) -> None:
    register_temporarily(plain_agent("no-start", start="begin"))

    assert problems_of("no-start") == [
        "Agent 'no-start': start node 'begin' is not one of its nodes ['echo']"
    ]


def test_check_reports_a_node_that_is_not_callable(register_temporarily: Any) -> None:
    register_temporarily(plain_agent("not-callable", nodes={"echo": echo, "broken": "echo"}))

    assert problems_of("not-callable") == ["Agent 'not-callable': node 'broken' is not callable"]


def test_check_reports_a_state_that_is_not_a_state_class(register_temporarily: Any) -> None:
    register_temporarily(plain_agent("dict-state", state=dict))

    assert problems_of("dict-state") == ["Agent 'dict-state': state must be a subclass of agents.state.State"]


def test_check_reports_a_messages_field_without_add_messages(register_temporarily: Any) -> None:
    register_temporarily(plain_agent("plain-messages", state=PlainMessages))

    assert problems_of("plain-messages") == [
        "Agent 'plain-messages': state field 'messages' must be Annotated[list[dict], add_messages]"
    ]


def test_check_reports_a_tool_agent_without_a_messages_field(register_temporarily: Any) -> None:
    register_temporarily(ToolAgent(name="no-messages", state=NoMessages, tools=[lookup]))

    assert problems_of("no-messages") == ["Agent 'no-messages': a ToolAgent's state needs a 'messages' field"]


def test_check_reports_an_invalid_queue_name(register_temporarily: Any) -> None:
    shouty = tool(name="shouty", approval=Approval(queue="Refunds Team"))(lookup.fn)
    register_temporarily(ToolAgent(name="bad-queue", state=Chat, tools=[shouty]))

    [problem] = problems_of("bad-queue")
    assert problem.startswith("Agent 'bad-queue': tool 'shouty': queue 'Refunds Team' must match")


def test_check_reports_an_invalid_tool_name(register_temporarily: Any) -> None:
    spaced = tool(name="look up")(lookup.fn)
    register_temporarily(ToolAgent(name="bad-tool-name", state=Chat, tools=[spaced]))

    [problem] = problems_of("bad-tool-name")
    assert problem.startswith("Agent 'bad-tool-name': tool name 'look up' must match")


def test_check_reports_duplicate_tool_names(register_temporarily: Any) -> None:
    again = tool(name="lookup")(lookup.fn)
    register_temporarily(ToolAgent(name="twice", state=Chat, tools=[lookup, again]))

    assert problems_of("twice") == ["Agent 'twice': tool 'lookup' is registered twice"]


def test_check_reports_an_approval_without_decisions(register_temporarily: Any) -> None:
    mute = tool(name="mute", approval=Approval(decisions=()))(lookup.fn)
    register_temporarily(ToolAgent(name="no-decisions", state=Chat, tools=[mute]))

    assert problems_of("no-decisions") == [
        "Agent 'no-decisions': tool 'mute': an approval must allow at least one decision"
    ]


def test_check_reports_an_unknown_decision(register_temporarily: Any) -> None:
    odd = tool(name="odd", approval=Approval(decisions=(Decision.APPROVE, "escalate")))(lookup.fn)  # type: ignore[arg-type]
    register_temporarily(ToolAgent(name="odd-decision", state=Chat, tools=[odd]))

    assert problems_of("odd-decision") == ["Agent 'odd-decision': tool 'odd': unknown decision 'escalate'"]


def test_check_reports_decisions_given_as_one_string_and_an_expiry_given_as_a_number(
    register_temporarily: Any,
) -> None:
    odd = tool(name="odd", approval=Approval(decisions="approve", expiry=3600))(lookup.fn)  # type: ignore[arg-type]
    register_temporarily(ToolAgent(name="odd-approval", state=Chat, tools=[odd]))

    assert problems_of("odd-approval") == [
        "Agent 'odd-approval': tool 'odd': decisions must be a tuple of decisions, e.g. (Decision.APPROVE,)",
        "Agent 'odd-approval': tool 'odd': expiry must be an Expiry(...), got 3600",
    ]


def test_check_reports_every_problem_of_an_agent(register_temporarily: Any) -> None:
    shouty = tool(name="shouty", approval=Approval(queue="Refunds Team"))(lookup.fn)
    register_temporarily(ToolAgent(name="Many Problems", state=Chat, tools=[shouty, lookup, lookup]))

    problems = problems_of("Many Problems")
    assert len(problems) == 3
    assert any("must be lowercase" in p for p in problems)
    assert any("queue 'Refunds Team'" in p for p in problems)
    assert any("'lookup' is registered twice" in p for p in problems)


def test_check_reports_a_tool_agent_whose_state_is_not_a_state_class(register_temporarily: Any) -> None:
    register_temporarily(ToolAgent(name="tool-dict-state", state=dict, tools=[lookup]))  # type: ignore[arg-type]

    assert problems_of("tool-dict-state") == [
        "Agent 'tool-dict-state': state must be a subclass of agents.state.State"
    ]


def test_check_reports_an_undecorated_function_given_as_a_tool(register_temporarily: Any) -> None:
    def plain(order_id: str) -> str:
        return order_id

    register_temporarily(ToolAgent(name="undecorated", state=Chat, tools=[plain]))  # type: ignore[list-item]

    [problem] = problems_of("undecorated")
    assert "is not a Tool; decorate the function with @tool" in problem


def test_check_agents_is_what_run_checks_calls() -> None:
    assert [m.msg for m in check_agents()] == [m.msg for m in run_checks(tags=["agents"])]


def test_check_refuses_a_step_chain_that_could_outlive_the_brokers_visibility_timeout() -> None:
    with (
        override_settings(
            STEP_CHAIN_S=200, OPENAI_TIMEOUT_S=60, CELERY_BROKER_TRANSPORT_OPTIONS={"visibility_timeout": 300}
        ),
        pytest.raises(SystemCheckError, match=r"agents\.E002.*may run 320 s"),
    ):
        call_command("check")
    with override_settings(
        STEP_CHAIN_S=10, OPENAI_TIMEOUT_S=60, CELERY_BROKER_TRANSPORT_OPTIONS={"visibility_timeout": 300}
    ):
        call_command("check")  # the defaults: 130 s of 300
