import json
from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

from approvals import permissions
from approvals.markdown import render_markdown

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return mark_safe(render_markdown(text))


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@register.filter
def cents(value: Any) -> str:
    try:
        return f"${int(value) / 100:,.2f}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def closed_reason(request_: Any, viewer: Any = None) -> str:
    from approvals.actions.decisions import describe_closed

    return describe_closed(request_, viewer=viewer if getattr(viewer, "is_authenticated", False) else None)


@register.filter
def actor(created_by: str) -> str:
    """'user:rita' -> 'rita'; any worker -> 'worker'."""
    kind, _, name = (created_by or "").partition(":")
    return "worker" if kind == "worker" else name or kind


@register.filter
def can_read_ledger(user: Any) -> bool:
    return permissions.can_read_ledger(user)
