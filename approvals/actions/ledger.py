"""Read and verify the audit ledger: any altered, deleted or inserted event breaks the chain."""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet

from approvals.actions.audit import GENESIS_HASH, event_body, event_hash
from approvals.day_range import whole_days
from approvals.models import AuditEvent, LedgerHead
from checkpoints.digest import canonical_json
from checkpoints.fields import open_json
from checkpoints.sealed_columns import stored_text
from checkpoints.storage.crypto import SealError


@dataclass(frozen=True)
class LedgerProblem:
    event_id: int | None
    problem: str

    def __str__(self) -> str:
        where = f"event {self.event_id}" if self.event_id is not None else "ledger head"
        return f"{where}: {self.problem}"


@dataclass(frozen=True)
class LedgerReport:
    checked: int
    problems: list[LedgerProblem]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_ledger(*, chunk_size: int = 2000) -> LedgerReport:
    """Recompute every hash and link; the head row must name the last event (the ledger's own
    appends move it; a deleted or an inserted tail does not)."""
    problems: list[LedgerProblem] = []
    expected_prev, checked = GENESIS_HASH, 0
    named_at: int | None = None  # the event the head row names, if it is there
    head = LedgerHead.objects.filter(pk=1).first()
    head_hash = head.last_hash if head else GENESIS_HASH
    # The data column is read raw and opened here: ciphertext that no key opens is a problem
    # to report, not an error. The hashes cover the plaintext, so rotating keys keeps them.
    events = AuditEvent.objects.defer("data").annotate(stored=stored_text("data")).order_by("id")
    for event in events.iterator(chunk_size=chunk_size):
        checked += 1
        if event.prev_hash != expected_prev:
            problems.append(
                LedgerProblem(
                    event.pk, "does not follow the previous event (one deleted or inserted before it?)"
                )
            )
        try:
            event.data = open_json(event.stored)
        except (SealError, ImproperlyConfigured, ValueError) as exc:
            problems.append(LedgerProblem(event.pk, f"its data cannot be read: {exc}"))
        else:
            if event.hash != event_hash(prev_hash=event.prev_hash, body=event_body(event)):
                problems.append(LedgerProblem(event.pk, "its content does not match its hash (altered)"))
        expected_prev = event.hash
        if event.hash == head_hash:
            named_at = event.pk
    if head_hash != expected_prev:
        if named_at is not None:
            problem = f"names event {named_at}, not the last one (events inserted after it?)"
        else:
            problem = "names a later event than the last one (events deleted at the end?)"
        problems.append(LedgerProblem(None, problem))
    return LedgerReport(checked=checked, problems=problems)


@dataclass(frozen=True)
class LedgerFilter:
    actor: str = ""
    action: str = ""
    thread: str = ""
    since: date | None = None
    until: date | None = None


def filtered_events(filters: LedgerFilter) -> QuerySet[AuditEvent]:
    """Events matching the filters, newest first. `action` matches a prefix ("claim" finds claim.*)."""
    events = AuditEvent.objects.order_by("-id")
    if filters.actor:
        events = events.filter(actor_name=filters.actor)
    if filters.action:
        events = events.filter(action__startswith=filters.action)
    if filters.thread:
        events = events.filter(thread_id=filters.thread)
    return events.filter(whole_days("created_at", since=filters.since, until=filters.until))


CSV_COLUMNS = ["id", "at", "actor", "action", "thread", "checkpoint", "approval", "data", "prev_hash", "hash"]


def csv_rows(events: QuerySet[AuditEvent]) -> Iterator[list[Any]]:
    """The CSV export, header first, oldest first so it reads as a chain."""
    yield CSV_COLUMNS
    for e in events.order_by("id").iterator(chunk_size=2000):
        yield [
            e.pk,
            e.created_at.isoformat(),
            _cell(e.actor_name),
            _cell(e.action),
            _cell(e.thread_id),
            e.checkpoint_id,
            e.approval_ref or "",
            _cell(canonical_json(e.data)),
            e.prev_hash,
            e.hash,
        ]


def _cell(text: str) -> str:
    # Spreadsheets run cells starting with these as formulas; model text may be anything.
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
