"""Forms: the edit form for a gated call (built from the tool's argument schema), and filters."""

from dataclasses import dataclass
from typing import Any

from django import forms
from django.http import QueryDict

from agents.registry import UnknownAgent, registry
from approvals.actions.ledger import LedgerFilter
from approvals.models import ApprovalRequest
from approvals.selectors import InboxFilter


@dataclass(frozen=True)
class ArgField:
    name: str
    label: str
    input_type: str
    value: Any
    multiline: bool
    error: str = ""
    help: str = ""


def _schema(request_: ApprovalRequest) -> dict[str, Any]:
    try:
        agent = registry.get(request_.agent)
    except UnknownAgent:
        return {}
    return agent.edit_schema(request_.action)


def edit_fields(
    request_: ApprovalRequest, *, values: dict[str, Any] | None = None, errors: dict[str, str] | None = None
) -> list[ArgField]:
    """One field per argument, pre-filled from the proposed (or re-submitted) values."""
    values = request_.args if values is None else values
    errors = errors or {}
    fields = []
    for name, prop in _schema(request_).get("properties", {}).items():
        kind = prop.get("type")
        input_type = {"integer": "number", "number": "number"}.get(kind, "text")
        if prop.get("format") == "email":
            input_type = "email"
        fields.append(
            ArgField(
                name=name,
                label=prop.get("title") or name.replace("_", " "),
                input_type=input_type,
                value=values.get(name, ""),
                multiline=kind == "string" and (prop.get("maxLength") or 0) > 300,
                error=errors.get(f"args.{name}", ""),
                help=prop.get("description", ""),
            )
        )
    return fields


def args_from_post(request_: ApprovalRequest, post: QueryDict) -> dict[str, Any]:
    """Collect `args.<name>` fields; the tool's schema coerces and validates them."""
    names = _schema(request_).get("properties", {}).keys()
    return {name: post[f"args.{name}"] for name in names if f"args.{name}" in post}


AGE_CHOICES = [
    ("", "any age"),
    ("900", "waiting 15 min+"),
    ("3600", "waiting 1 h+"),
    ("14400", "waiting 4 h+"),
    ("86400", "waiting 1 day+"),
]


class InboxFilterForm(forms.Form):
    """The inbox's filters (GET). Unknown values are refused, not ignored."""

    queue = forms.ChoiceField(required=False)
    agent = forms.ChoiceField(required=False)
    age = forms.ChoiceField(required=False, choices=AGE_CHOICES)

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
