import json
from typing import Any

from django import template
from django.urls import NoReverseMatch, reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from approvals.access import Access
from approvals.actions import signoffs
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
    return Access.of(user).can_read_ledger


@register.filter
def args_mark(args: Any) -> str:
    return signoffs.args_mark(args)


@register.filter
def may_undo(request_: Any, user: Any) -> bool:
    """Whether the user may take the request's decision back (do_undo's rule)."""
    return bool(request_.decided_by_id == user.pk or Access.of(user).can_manage_claims)


@register.filter
def is_admin(user: Any) -> bool:
    """The admin role (Django admin's own rule here, approvals.admin.admins_only)."""
    return Access.of(user).is_admin


@register.simple_tag
def thread_link(thread_id: str, css: str = "") -> SafeString:
    """A link to the thread's page, or its id as text when it cannot be a URL (a row stored
    before ids were checked): one bad row must not break a page listing everyone's threads."""
    try:
        url = reverse("approvals:thread", args=[thread_id])
    except NoReverseMatch:
        return format_html(
            '<span class="{}" title="this id cannot be opened as a page">{}</span>', css, thread_id
        )
    return format_html('<a class="{}" href="{}">{}</a>', css, url, thread_id)


@register.simple_tag
def safe_url(name: str, *args: Any) -> str:
    """The URL, or "" when a stored id cannot be one (a row stored before ids were checked)."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return ""


def _args(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@register.filter
def gate_summary(request_: Any) -> str:
    """The request's one-line summary, as its tool declares it (or a generic one)."""
    from approvals import presentation

    return presentation.summary(agent=request_.agent, action=request_.action, args=_args(request_.args))


@register.filter
def path_breaks(path: str) -> SafeString:
    """A state path that wraps after its dots (messages[3].<wbr>content), not inside a word."""
    return mark_safe(".<wbr>".join(escape(part) for part in str(path).split(".")))  # each part escaped


@register.filter
def call_summary(call: Any, agent: str) -> str:
    """A call that ran ({"tool", "arguments"}: an object, or JSON text as OpenAI's format keeps
    it) in its tool's words: "Refund $19.99 to Alan Turing (order ORD-1003)"; arguments that are
    not an object as written."""
    from approvals import presentation
    from checkpoints.diff import json_object

    raw = call.get("arguments")
    args = raw if isinstance(raw, dict) else json_object(raw)
    if args is None:
        return f"{call.get('tool', '')}({call.get('arguments', '')})"
    return presentation.summary(agent=agent, action=str(call.get("tool", "")), args=args)


@register.filter
def gate_preview(request_: Any, args: Any = None) -> SafeString:
    """The request's arguments (or `args`, e.g. the edited ones) as its tool renders them."""
    from approvals import presentation

    shown = _args(request_.args if args is None else args)
    return presentation.preview(agent=request_.agent, action=request_.action, args=shown)


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    """`{{ notes|get_item:c.id }}`: a dict's value, or "" when absent."""
    return mapping.get(key, "") if isinstance(mapping, dict) else ""


@register.filter
def ledger_facts(data: Any) -> list[dict[str, Any]]:
    from approvals import presentation

    return presentation.ledger_facts(data if isinstance(data, dict) else {})


@register.filter
def policy_note(item: Any) -> str:
    """What a policy did to a request, in words: "approved automatically by policy 'small
    refunds' v3", "1 of 2 approvals: rita", "routed here by policy 'big refunds' v1" ("" if none)."""
    from approvals.actions.signoffs import describe_signoffs, needs_signoffs
    from approvals.policies import LEFT_TO_A_PERSON

    if not getattr(item, "policy_name", ""):
        if item.is_pending and needs_signoffs(item):
            return describe_signoffs(item)
        # A policy that could not be evaluated left it to a person (an escalation says its own
        # why): said while it waits, and kept on its record once a person has decided.
        if item.escalated_from:
            return ""
        left = item.status_reason.startswith(LEFT_TO_A_PERSON)
        return item.status_reason if item.is_pending or left else ""
    label = item.policy_label
    if item.decided_by_id is None and item.is_decided:
        return f"{item.status} automatically by policy {label}"
    if item.is_pending and needs_signoffs(item):
        return f"{describe_signoffs(item)} (policy {label})"
    if item.is_pending and item.policy_id is not None:
        return f"routed to {item.queue} by policy {label}"
    return ""
