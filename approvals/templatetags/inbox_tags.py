"""Template filters for the inbox and the ledger: short ages, compact JSON."""

import json
from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.timesince import timesince, timeuntil

register = template.Library()


@register.filter
def ago(value: datetime | None) -> str:
    """'3 hours ago', one unit only: enough to sort by eye."""
    if value is None:
        return ""
    if (timezone.now() - value).total_seconds() < 60:
        return "just now"
    return f"{timesince(value, timezone.now(), depth=1)} ago"


@register.filter
def seconds_until(value: datetime | None) -> float:
    """Seconds from now until value (0 once it has passed)."""
    return max((value - timezone.now()).total_seconds(), 0.0) if value else 0.0


@register.filter
def within(value: datetime | None) -> str:
    """'in 4 hours', one unit only; 'any moment' once it has passed."""
    if value is None:
        return ""
    return f"in {timeuntil(value, timezone.now(), depth=1)}" if value > timezone.now() else "any moment"


@register.filter
def compact(value: Any, limit: int = 160) -> str:
    """One-line JSON, cut at `limit` characters; long hex digests shortened."""
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "…"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"
