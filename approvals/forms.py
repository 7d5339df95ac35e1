"""Forms: the edit form for a gated call (built from the tool's argument schema), and filters."""

import json
from dataclasses import dataclass
from typing import Any

from django import forms
from django.http import QueryDict

from agents.registry import UnknownAgent, registry
from approvals.actions.ledger import LedgerFilter
from approvals.models import ApprovalRequest, Policy
from approvals.policy_targets import target_errors
from approvals.selectors import InboxFilter
from checkpoints import json_text


@dataclass(frozen=True)
class ArgField:
    name: str
    label: str
    input_type: str
    value: Any
    multiline: bool
    error: str = ""
    help: str = ""
    as_json: bool = False  # edited as JSON text (lists, objects, unions)


SCALARS = {"string", "integer", "number", "boolean"}


class UnreadableJSON(str):
    """Text posted for a JSON field that does not parse: kept as typed, so the schema refuses it
    (a list or object field reads no string) and the form shows it back with why."""

    problem: str

    def __new__(cls, text: str, *, problem: str) -> "UnreadableJSON":
        made = super().__new__(cls, text)
        made.problem = problem
        return made


@dataclass(frozen=True)
class ArgKind:
    """How one argument's schema is edited: a plain input, or JSON text."""

    prop: dict[str, Any]  # the schema that types the input (a nullable's non-null option)
    nullable: bool
    json: bool


def _kind(prop: dict[str, Any]) -> ArgKind:
    """A single scalar type (string, number, ...), perhaps nullable, is a plain input; lists,
    objects, unions of several types and untyped values are edited as JSON."""
    options = prop.get("anyOf") or prop.get("oneOf") or [prop]
    nullable = any(o.get("type") == "null" for o in options)
    typed = [o for o in options if o.get("type") != "null"]
    if len(typed) == 1 and typed[0].get("type") in SCALARS:
        return ArgKind(prop={**prop, **typed[0]}, nullable=nullable, json=False)
    return ArgKind(prop=prop, nullable=nullable, json=True)


def _schema(request_: ApprovalRequest) -> dict[str, Any]:
    try:
        agent = registry.get(request_.agent)
    except UnknownAgent:
        return {}
    return agent.edit_schema(request_.action)


def _shown(value: Any, *, kind: ArgKind) -> Any:
    """The field's text: JSON for JSON fields (str() would show Python: "['a']", "None")."""
    if value is None and kind.nullable:
        return ""
    if not kind.json or isinstance(value, UnreadableJSON):
        return value
    return json.dumps(value, indent=2 if isinstance(value, dict | list) else None, ensure_ascii=False)


def edit_fields(
    request_: ApprovalRequest, *, values: dict[str, Any] | None = None, errors: dict[str, str] | None = None
) -> list[ArgField]:
    """One field per argument, pre-filled from the arguments as they stand (the proposal, or
    the last edit a two-person request waits on) or the re-submitted values."""
    values = request_.effective_args if values is None else values
    errors = errors or {}
    fields = []
    for name, prop in _schema(request_).get("properties", {}).items():
        kind = _kind(prop)
        typed = kind.prop.get("type")
        input_type = {"integer": "number", "number": "number"}.get(str(typed), "text")
        if kind.prop.get("format") == "email":
            input_type = "email"
        value = values.get(name, "")
        label = prop.get("title") or name.replace("_", " ")
        error = errors.get(f"args.{name}", "")
        if error and isinstance(value, UnreadableJSON):
            error = f"{label} is not valid JSON: {value.problem}"
        fields.append(
            ArgField(
                name=name,
                label=label,
                input_type=input_type,
                value="" if name not in values else _shown(value, kind=kind),
                multiline=(typed == "string" and (kind.prop.get("maxLength") or 0) > 300)
                or kind.json,  # JSON text: a list or object spans lines
                error=error,
                help=prop.get("description", ""),
                as_json=kind.json,
            )
        )
    return fields


OMITTED = object()  # an empty JSON field: the argument is left out


def _parsed(text: str, *, kind: ArgKind) -> Any:
    """A posted field's value; `OMITTED` for an empty JSON field that is not nullable."""
    if kind.nullable and not text.strip():
        return None  # an empty Optional is None, not "" (nor the text "None")
    if not kind.json:
        return text  # as before: the tool's schema coerces "42" to 42
    if not text.strip():
        return OMITTED  # the tool's default applies, or it says the argument is required
    try:
        return json_text.loads(text)  # bounded nesting: never a RecursionError
    except json.JSONDecodeError as exc:
        return UnreadableJSON(text, problem=f"{exc.msg} (line {exc.lineno}, column {exc.colno})")
    except ValueError as exc:  # NaN, too deep, an integer too long to read
        return UnreadableJSON(text, problem=str(exc))


def args_from_post(request_: ApprovalRequest, post: QueryDict) -> dict[str, Any]:
    """Collect `args.<name>` fields; the tool's schema coerces and validates them."""
    args = {}
    for name, prop in _schema(request_).get("properties", {}).items():
        if f"args.{name}" in post:
            value = _parsed(str(post[f"args.{name}"]), kind=_kind(prop))
            if value is not OMITTED:
                args[name] = value
    return args


AGE_CHOICES = [
    ("", "any age"),
    ("900", "waiting 15 min+"),
    ("3600", "waiting 1 h+"),
    ("14400", "waiting 4 h+"),
    ("86400", "waiting 1 day+"),
]


class InboxFilterForm(forms.Form):
    """The inbox's filters (GET). Unknown values are refused, not ignored."""

    # Said in the page's words: Django's "Select a valid choice. x is not one of the available
    # choices" names no list a reviewer can see.
    queue = forms.ChoiceField(
        required=False, error_messages={"invalid_choice": "there is no queue “%(value)s” that you can see."}
    )
    agent = forms.ChoiceField(
        required=False, error_messages={"invalid_choice": "no agent is registered as “%(value)s”."}
    )
    age = forms.ChoiceField(
        required=False,
        choices=AGE_CHOICES,
        error_messages={"invalid_choice": "“%(value)s” is not one of the ages the list offers."},
    )

    def __init__(self, data: QueryDict | None, *, queues: list[str]) -> None:
        super().__init__(data)
        queue, agent = self.fields["queue"], self.fields["agent"]
        assert isinstance(queue, forms.ChoiceField) and isinstance(agent, forms.ChoiceField)
        queue.choices = [("", "all queues"), *((q, q) for q in queues)]
        agent.choices = [("", "all agents"), *((n, n) for n in registry.names())]

    def filters(self) -> InboxFilter:
        """Call after is_valid()."""
        data = self.cleaned_data
        return InboxFilter(queue=data["queue"], agent=data["agent"], min_age_s=int(data["age"] or 0))


class LedgerFilterForm(forms.Form):
    actor = forms.CharField(required=False, max_length=150)
    action = forms.CharField(required=False, max_length=40, help_text="A prefix: claim finds claim.*")
    thread = forms.CharField(required=False, max_length=100)
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def filters(self) -> LedgerFilter:
        """Call after is_valid()."""
        data = self.cleaned_data
        return LedgerFilter(
            actor=data["actor"],
            action=data["action"],
            thread=data["thread"],
            since=data["since"],
            until=data["until"],
        )


class PolicyAdminForm(forms.ModelForm):
    """The admin's policy form: a policy must name a tool an agent gates (else it never applies)."""

    class Meta:
        model = Policy
        fields = [
            *("name", "tool", "agent", "order", "enabled", "when", "action", "queue", "approvers"),
            *("groups", "message", "thread_id", "until"),
        ]

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        if "tool" not in cleaned:  # the field's own error (required, too long) is shown
            return cleaned
        # As saved, from the initial values: an unchanged agent and tool stand (a retired agent's).
        was = (self.initial.get("agent", ""), self.initial.get("tool", "")) if self.instance.pk else None
        for field, error in target_errors(
            agent=cleaned.get("agent") or "", tool=cleaned["tool"], was=was
        ).items():
            self.add_error(field, error)
        return cleaned
