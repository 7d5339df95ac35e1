"""A condition's errors say in plain words what is wrong and where (which argument or field, of
what type), with the CEL library's own words kept in brackets: when it is saved (the API's
400, the admin form), and when it fails on a call (the request's status_reason, the preview,
the ledger, the log)."""

import logging
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client

from agents.examples.agents import ConversationState
from agents.prebuilt import ToolAgent
from agents.registry import registry
from agents.tools import Approval, Decision, tool
from approvals.actions.policies import do_create_policy
from approvals.actions.policy_gates import POLICY_FAILED
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalStatus, AuditEvent, Policy
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

AGENT, TOOL = "notes-test", "send_note"


@tool(approval=Approval(queue="notes", decisions=(Decision.APPROVE, Decision.REJECT)))
def send_note(to: str | None, subject: str, copies: int, items: list[dict[str, int]]) -> str:
    """Send a note (`to` may be null: the model decides)."""
    return "sent"


@pytest.fixture(autouse=True)
def notes_agent() -> Iterator[None]:
    registry.register(ToolAgent(name=AGENT, state=ConversationState, tools=[send_note]))
    try:
        yield
    finally:
        registry.unregister(AGENT)


def api() -> Client:
    admin = User.objects.filter(username="ada").first() or make_user("ada", "admin")
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=admin)}"})


BODY = {"name": "rule", "agent": AGENT, "tool": TOOL, "action": "deny"}
ARGS = {"to": None, "subject": "Hi", "copies": 2, "items": [{"n": 1}]}

SAVED = [
    (
        "args.to.mtches('@example')",
        "mtches() is not a function of this CEL interpreter (did you mean matches?)",
    ),
    ("args.subject.lowerAscii() == 'hi'", "lowerAscii() is not a function of this CEL interpreter"),
    ("arg.to == 'a@example.com'", "unknown variable arg (did you mean args?)"),
    ("args.copies <", "Syntax error at line 1, column 14: the condition ends where more was expected"),
    ("args.copies <", "[CEL: mismatched input '<EOF>' expecting"),  # the library's words, kept
    ("args.subject == 'Hi", "Syntax error at line 1, column 17: a quote is not closed"),
    ("args.copies > 1 &&& true", "'&' is not valid CEL here"),
    # A function this interpreter has, with arguments it does not take (no time zone here).
    ("now.getHours('Europe/Paris') > 8", "getHours() on now (a timestamp) does not take the arguments"),
]


@pytest.mark.parametrize(("when", "says"), SAVED)
def test_a_condition_that_cannot_be_saved_says_what_is_wrong_and_where(when: str, says: str) -> None:
    response = api().post("/api/policies", {**BODY, "when": when}, content_type="application/json")

    assert response.status_code == 400, response.content
    assert says in response.json()["errors"]["when"]
    assert response.json()["errors"]["when"].startswith("CEL error: ")
    assert not Policy.objects.exists()
    with pytest.raises(ValidationError, match="CEL error"):  # the admin form says the same
        Policy(name="x", agent=AGENT, tool=TOOL, when=when, action="deny").full_clean()


@pytest.mark.parametrize(
    "when",
    ["type(args.to) == string && args.to.endsWith('@example.com')", "optional.of(args.to).hasValue()"],
)
def test_type_names_and_optionals_are_not_unknown_variables(when: str) -> None:
    response = api().post("/api/policies", {**BODY, "when": when}, content_type="application/json")

    assert response.status_code == 201, response.content


FAILED = [
    # A missing argument, and a typo in one: the argument named, the fix suggested.
    (
        "args.cc.matches('@example')",
        "args.cc is missing: the call has no argument 'cc'; write has(args.cc) && … if it may be "
        "left out [CEL: no such key: 'cc']",
    ),
    ("args.copis > 1", "args.copis is missing: the call has no argument 'copis' (did you mean copies?)"),
    # The README's allow-list on a null `to`: not "Undefined ... 'matches'" alone.
    (
        "!args.to.matches('@example')",
        "args.to is null; matches() needs a string [CEL: Undefined variable or function: 'matches']",
    ),
    ("args.copies.startsWith('1')", "args.copies is an int; startsWith() needs a string"),
    ("args.items.contains(1)", "args.items is a list; contains() needs a string"),
    # Wrong types for an operator: which values the condition read, and their types.
    (
        "args.subject > 5",
        "an operator or function got values of types it cannot combine (CEL converts none); it read "
        'args.subject = "Hi" (a string) [CEL: No such overload',
    ),
    # A field of a list's items, in a macro; a field of effects.
    ("args.items.exists(i, i.m > 1)", "i.m is missing: an item of args.items has no field 'm'"),
    ("effects.summ.copies > 2", "effects.summ is missing: effects has no field 'summ' (did you mean sum?)"),
    ("args.items[3].n > 1", "an index is past the end of a list (args.items has 1)"),
]


@pytest.mark.parametrize(("when", "says"), FAILED)
def test_a_condition_that_fails_on_a_call_says_what_and_where_everywhere_an_admin_looks(
    when: str, says: str, caplog: pytest.LogCaptureFixture
) -> None:
    do_create_policy(
        actor=None, fields={**BODY, "name": "the rest", "when": "true", "order": 20}, groups=None
    )
    before = make_gate(agent=AGENT, action=TOOL, args=ARGS)
    assert before.status == ApprovalStatus.REJECTED  # decided by 'the rest', before the rule
    saved = api().post("/api/policies", {**BODY, "when": when, "order": 10}, content_type="application/json")
    assert saved.status_code == 201, saved.content

    with caplog.at_level(logging.WARNING, logger="approvals.policies"):
        request_ = make_gate(agent=AGENT, action=TOOL, args=ARGS)

    assert request_.status == ApprovalStatus.PENDING
    assert request_.status_reason.startswith("Left to a person: policy 'rule' v1 could not be evaluated")
    assert says in request_.status_reason
    assert says in caplog.text
    assert says in AuditEvent.objects.get(action=POLICY_FAILED).data["error"]
    preview = api().post("/api/policies/preview", {"id": saved.json()["id"]}, content_type="application/json")
    [row] = [r for r in preview.json()["changed"] if r["request_id"] == before.pk]
    assert row["would"].startswith("to a person: policy 'rule' v1 could not be evaluated")
    assert says in row["would"]


def test_the_reason_fits_the_request_and_the_ledger_keeps_all_of_it() -> None:
    long_name = "a policy with a rather long name that an admin wrote to be very clear about it"
    do_create_policy(
        actor=None,
        fields={
            **BODY,
            "name": long_name,
            "when": "args.subject > 5 && args.copies > 1 && args.subject != 'x'",
        },
        groups=None,
    )

    request_ = make_gate(agent=AGENT, action=TOOL, args=ARGS)

    assert len(request_.status_reason) <= 300
    assert "[CEL: No such overload" in AuditEvent.objects.get(action=POLICY_FAILED).data["error"]


def test_a_condition_that_gives_no_bool_says_what_it_gave() -> None:
    do_create_policy(actor=None, fields={**BODY, "when": "args.copies"}, groups=None)

    request_ = make_gate(agent=AGENT, action=TOOL, args=ARGS)

    assert "its condition gave 2, not true or false" in request_.status_reason
