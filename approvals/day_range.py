"""Filters by whole days, for the thread list and the ledger."""

from datetime import date, datetime, time, timedelta

from django.db.models import Q
from django.utils import timezone


def whole_days(field: str, *, since: date | None, until: date | None) -> Q:
    """From the start of `since` to the end of `until` in the current time zone, as datetime
    bounds on the column (not a date cast of it). The last day a date can name has no day after
    it: no upper bound."""
    bounds = Q()
    if since:
        bounds &= Q(**{f"{field}__gte": _midnight(since)})
    if until and until < date.max:
        bounds &= Q(**{f"{field}__lt": _midnight(until + timedelta(days=1))})
    return bounds


def _midnight(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))
