"""How a gated call reads to a person: the summary line and preview its tool declares
(`Approval(summary=..., render=...)`), or a generic one built from the arguments alone.

Agent-agnostic: the agent's `approval_for(action)` (the gate protocol) gives the rendering;
an unknown agent or action gets the fallback.
"""

import json
import logging
from dataclasses import asdict
from typing import Any

from django.template import TemplateDoesNotExist, TemplateSyntaxError
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from agents.registry import UnknownAgent, registry
from agents.tools import Approval
from approvals.markdown import render_markdown
from checkpoints.diff import diff_values

log = logging.getLogger(__name__)
SUMMARY_CHARS = 160


def gate_approval(*, agent: str, action: str) -> Approval | None:
    """The Approval the agent's tool declares, or None (unknown agent, tool or runtime)."""
    try:
        found = registry.get(agent)
    except UnknownAgent:
        return None
    return found.approval_for(action)


def humanize(name: str) -> str:
    """'issue_refund' -> 'Issue refund'."""
    return name.replace("_", " ").strip().capitalize()


def _scalar(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return " ".join(text.split())


def summary(*, agent: str, action: str, args: dict[str, Any]) -> str:
    """One line: the tool's own summary, else 'Issue refund · order id ORD-1 · amount cents 5'."""
    approval = gate_approval(agent=agent, action=action)
    line = approval.summarize(args) if approval is not None else ""
    if not line:
        parts = [humanize(action), *(f"{humanize(k).lower()} {_scalar(v)}" for k, v in args.items())]
        line = " · ".join(parts)
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1] + "…"


def preview(*, agent: str, action: str, args: dict[str, Any]) -> SafeString:
    """The arguments as the tool renders them (a template, or markdown through the sanitizer),
    else each argument on its own line with text kept as written (line breaks and all)."""
    approval = gate_approval(agent=agent, action=action)
    render = approval.render if approval is not None else ""
    try:
        if callable(render):
            return mark_safe(f'<div class="preview">{render_markdown(str(render(args)))}</div>')
        if render:
            return mark_safe(render_to_string(render, {"args": args}))
    except (TemplateDoesNotExist, TemplateSyntaxError, KeyError, TypeError, ValueError, AttributeError):
        log.warning(
            "the renderer of %s.%s failed; showing its arguments plainly", agent, action, exc_info=True
        )
    return mark_safe(render_to_string("approvals/_args_preview.html", {"rows": arg_rows(args)}))


def arg_rows(args: dict[str, Any]) -> list[tuple[str, str]]:
    """Each argument as (label, text): text as written, anything else as indented JSON."""
    return [
        (humanize(k), v if isinstance(v, str) else json.dumps(v, indent=2, ensure_ascii=False))
        for k, v in args.items()
    ]


CHECKPOINT_KEYS = {"previous_head": "Head before", "from_checkpoint": "Forked from"}
ARGS_KEYS = {"args_seen": "Arguments seen", "args": "Arguments decided"}
LABELS = {"seen_digest": "State seen (digest)"}
LONG_TEXT = 400
EMPTY: tuple[Any, ...] = (None, "", [], {})


def ledger_facts(data: dict[str, Any]) -> list[dict[str, Any]]:
    """An audit event's data as labelled facts a person reads: diffs as old → new, checkpoint
    ids (linked by the template), arguments one per line, and anything else as short text."""
    facts: list[dict[str, Any]] = []
    seen, decided = data.get("args_seen"), data.get("args")
    if isinstance(seen, dict) and isinstance(decided, dict) and seen != decided:  # a reviewer's edit
        changes = [_change(asdict(c)) for c in diff_values(seen, decided)]
        facts.append({"kind": "changes", "label": "Arguments changed", "value": changes})
    for key, value in data.items():
        label = CHECKPOINT_KEYS.get(key) or ARGS_KEYS.get(key) or LABELS.get(key) or humanize(key)
        if key == "changes" and isinstance(value, list):
            changes = [_change(c) for c in value if isinstance(c, dict)]
            facts.append({"kind": "changes", "label": "Changes", "value": changes})
        elif key == "diff" and isinstance(value, dict):  # a policy's fields: {field: [old, new]}
            changes = [
                _field_change(field, pair)
                for field, pair in value.items()
                if not (isinstance(pair, list) and all(side in EMPTY for side in pair))  # left empty
            ]
            facts.append({"kind": "changes", "label": "Changes", "value": changes})
        elif key == "policy" and isinstance(value, dict) and {"name", "version"} <= set(value):
            facts.append({"kind": "text", "label": label, "value": f"'{value['name']}' v{value['version']}"})
        elif key in CHECKPOINT_KEYS and isinstance(value, str) and value:
            facts.append({"kind": "checkpoint", "label": label, "value": value})
        elif key in ARGS_KEYS and isinstance(value, dict):
            rows = [(humanize(k), _long(v)) for k, v in value.items()]
            facts.append({"kind": "args", "label": label, "value": rows})
        elif value not in (None, "", [], {}):
            facts.append({"kind": "text", "label": label, "value": _long(value)})
    return facts


def _field_change(field: str, pair: Any) -> dict[str, str]:
    old, new = pair if isinstance(pair, list) and len(pair) == 2 else (None, pair)
    kind = "added" if old in EMPTY else "removed" if new in EMPTY else "changed"
    return _change({"kind": kind, "path": field, "old": old, "new": new})


def _change(change: dict[str, Any]) -> dict[str, str]:
    return {
        "kind": str(change.get("kind", "")),
        "path": str(change.get("path", "")),
        "old": _long(change.get("old")) if change.get("kind") != "added" else "",
        "new": _long(change.get("new")) if change.get("kind") != "removed" else "",
    }


def _long(value: Any) -> str:
    """Text as written (a whole path is never cut); very long values end with an ellipsis."""
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "…"  # a SHA-256 digest: its head tells events apart
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= LONG_TEXT else text[: LONG_TEXT - 1] + "…"
