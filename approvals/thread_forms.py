"""Forms for the thread pages: list filters and the JSON state editor."""

import json
from typing import Any

from django import forms

from agents.actions import InvalidInput
from agents.registry import registry
from approvals.thread_selectors import ThreadFilters
from checkpoints import json_text
from checkpoints.models import ThreadStatus


class ThreadFilterForm(forms.Form):
    q = forms.CharField(
        required=False,
        max_length=200,
        label="Search",
        widget=forms.TextInput(attrs={"placeholder": "Thread id or words in messages"}),
    )
    agent = forms.ChoiceField(required=False)
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *ThreadStatus.choices])
    created_after = forms.DateField(
        required=False, label="From", widget=forms.DateInput(attrs={"type": "date"})
    )
    created_before = forms.DateField(
        required=False, label="To", widget=forms.DateInput(attrs={"type": "date"})
    )
    decided_by = forms.CharField(
        required=False,
        max_length=150,
        label="Decided by",
        widget=forms.TextInput(attrs={"placeholder": "username"}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        agent: forms.ChoiceField = self.fields["agent"]  # type: ignore[assignment]
        agent.choices = [("", "any agent"), *((n, n) for n in registry.names())]

    def filters(self) -> ThreadFilters:
        """The valid filters (invalid ones are dropped and shown as form errors)."""
        self.is_valid()  # cleaned_data then holds the valid fields, even when another is not
        return ThreadFilters(**{k: v for k, v in self.cleaned_data.items() if v})


def parse_state(text: str) -> dict[str, Any]:
    """Parse the editor's JSON, or raise InvalidInput saying where it is wrong."""
    try:
        values = json_text.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            {"values": f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"}
        ) from exc
    except ValueError as exc:  # too deep, NaN, an endless integer
        raise InvalidInput({"values": f"not JSON Gatehouse can store: {exc}"}) from exc
    if not isinstance(values, dict):
        raise InvalidInput({"values": "must be a JSON object with the state's fields"})
    return values
