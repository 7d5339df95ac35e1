"""Inbox pushes whose database work does not grow with the number of open inboxes.

An `inbox.changed` event names the requests that changed and the queues they touch. The first
socket of a process to handle it loads those rows and every queue's counts (a few queries); the
process's other sockets reuse them, and each distinct look of a row (claimed by the viewer or not,
may claim, which queues' side effects the viewer sees) is rendered once. A socket then sends only
what changes on its page: rows inserted in order, replaced or deleted (htmx out-of-band swaps),
and its own counts. Call everything here from the database thread (database_sync_to_async): it
is one thread per process, so the caches need no lock.
"""

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.http import QueryDict
from django.template.loader import render_to_string

from approvals import effects, selectors
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent
from approvals.selectors import INBOX_LIMIT, InboxFilter
from checkpoints import json_text

KEEP_EVENTS = 64  # events whose loaded rows stay cached for late sockets
MAX_SHOWN_TEXT = 24 * (INBOX_LIMIT + 1)  # a page's list of its rows' ids, as JSON
NOT_THE_DECISION = ("decision.undo", "decision.signoff")  # ledger entries that decide nothing


@dataclass(frozen=True)
class Undone:
    """A decision taken back (the request's latest ledger entry is its undo): by whom, and whose."""

    by_id: Any
    by: str
    decider_id: Any
    decider: str

    def words(self, *, pk: int, viewer_id: Any) -> str:
        """What a viewer hears when the request comes back to their list."""
        what = f"decision on request {pk}"
        whose = f"{self.decider}'s" if self.decider else "the"
        if self.by_id == viewer_id:
            said = f"Your {what} was undone" if self.decider_id == viewer_id else f"You undid {whose} {what}"
        elif self.decider_id == viewer_id:
            said = f"{self.by} undid your {what}"
        elif self.decider_id == self.by_id:
            said = f"{self.by} undid their {what}"
        else:
            said = f"{self.by} undid {whose} {what}"
        return f"{said}; it is back in your list"


def undone_among(items: list[ApprovalRequest]) -> dict[int, Undone]:
    """The items whose latest ledger entry is an undo. One query, and none unless an item is
    claimed: an undo hands the request to whoever undid it (if they may decide it), and a new
    gate or an escalation comes unclaimed."""
    ids = [i.pk for i in items if i.claimed_by_id is not None]
    if not ids:
        return {}
    entries = AuditEvent.objects.filter(approval_id__in=ids).order_by("id")
    latest: dict[int, tuple[str, Any, str]] = {}
    decided: dict[int, tuple[Any, str]] = {}
    for pk, action, actor_id, name in entries.values_list("approval_id", "action", "actor_id", "actor_name"):
        latest[pk] = (action, actor_id, name)
        if action.startswith("decision.") and action not in NOT_THE_DECISION:
            decided[pk] = (actor_id, name)
    undone = {pk: (by_id, by) for pk, (action, by_id, by) in latest.items() if action == "decision.undo"}
    return {
        pk: Undone(
            by_id=by_id,
            by=by,
            decider_id=decided.get(pk, (None, ""))[0],
            decider=decided.get(pk, (None, ""))[1],
        )
        for pk, (by_id, by) in undone.items()
    }


@dataclass
class Change:
    """What one event changed, as the database has it now."""

    rows: dict[int, ApprovalRequest]  # the named requests still pending (closed or gone: absent)
    closed: dict[int, ApprovalRequest]  # the named requests decided, expired or superseded
    counts: dict[str, tuple[int, int]]  # every queue's pending and claimed counts
    html: dict[tuple[Any, ...], str] = field(default_factory=dict)  # rendered rows, by look
    flagged: frozenset[str] | None = None  # whose "already done" flags the rows carry now
    undone: dict[int, Undone] | None = None  # rows back by an undo, read when one is inserted

    @classmethod
    def of(cls, requests: list[ApprovalRequest], *, counts: dict[str, tuple[int, int]]) -> "Change":
        """The requests as rows (still pending) and closed ones (why a row left a list)."""
        return cls(
            rows={r.pk: r for r in requests if r.status == ApprovalStatus.PENDING},
            closed={r.pk: r for r in requests if r.status != ApprovalStatus.PENDING},
            counts=counts,
        )


_changes: "OrderedDict[str, Change]" = OrderedDict()


def change_for(*, event_id: str, request_ids: list[int]) -> Change:
    """The event's rows and counts, loaded by the first socket that asks."""
    if event_id not in _changes:
        # Closed ones too, in the same query: why a row left a list is said to who saw it leave.
        named = ApprovalRequest.objects.filter(pk__in=request_ids)
        change = Change.of(list(named.select_related("thread", "claimed_by", "decided_by")), counts={})
        if change.rows:
            selectors.with_asked_messages(list(change.rows.values()))
        change.counts = selectors.pending_counts()
        _changes[event_id] = change
        while len(_changes) > KEEP_EVENTS:
            _changes.popitem(last=False)
    return _changes[event_id]


def shown_rows(text: str | None) -> list[int]:
    """The request ids a page says it showed (`{"shown": [12, 14]}`); nothing from anything else."""
    try:
        shown = json_text.loads(text or "").get("shown") if len(text or "") <= MAX_SHOWN_TEXT else None
    except (ValueError, AttributeError):
        return []
    if not isinstance(shown, list):
        return []
    # A row's id fits a bigint; a page shows at most INBOX_LIMIT rows.
    return [pk for pk in shown[:INBOX_LIMIT] if type(pk) is int and 0 < pk < 2**63]


@dataclass
class Viewer:
    """Who a socket shows the inbox to, as of its connect or last periodic refresh."""

    user: Any
    closed: set[str]  # queues the user may not see
    visible: set[str]  # known queues the user may see
    can_claim: bool
    can_read_ledger: bool


def row_html(change: Change, item: ApprovalRequest, *, viewer: Viewer, oob: bool) -> str:
    """The row as this viewer sees it, rendered once per distinct look."""
    mine = item.claimed_by_id is not None and item.claimed_by_id == viewer.user.pk
    closed = frozenset(viewer.closed)
    key = (item.pk, mine, viewer.can_claim, closed, oob)
    if key not in change.html:
        if change.flagged != closed:  # "already done" depends on the queues one may see
            effects.flag_done_outside(list(change.rows.values()), closed=set(closed))
            change.flagged = closed
        context = {"item": item, "user": viewer.user, "can_claim": viewer.can_claim, "row_oob": oob}
        change.html[key] = render_to_string("approvals/inbox.html#row", context)
    return change.html[key]


def left_html(change: Change, pk: int, *, viewer: Viewer, quiet: bool = False) -> str:
    """What the page announces of a row that left this viewer's list: why, rendered once per
    distinct wording; nothing (`quiet`, or their own decision, which the page already said), but
    the page still learns the row's leaving is accounted for."""
    gone = change.closed.get(pk) or change.rows.get(pk)  # neither: deleted with its thread
    mine = gone is not None and gone.decided_by_id is not None and gone.decided_by_id == viewer.user.pk
    visible = gone is not None and gone.queue in viewer.visible
    key = ("left", pk, visible, quiet or mine)
    if key not in change.html:
        context = {"gone_pk": pk, "gone": gone, "queue_visible": visible, "quiet": quiet or mine}
        change.html[key] = render_to_string("approvals/inbox.html#left", context)
    return change.html[key]


def back_html(change: Change, item: ApprovalRequest, *, viewer: Viewer) -> str:
    """What the page announces of a row that came back to this viewer's list by an undo, in
    place of "New request" (a row that is new needs nothing: its link says it)."""
    if change.undone is None:
        change.undone = undone_among(list(change.rows.values()))
    undone = change.undone.get(item.pk)
    if undone is None:
        return ""
    context = {"back_pk": item.pk, "words": undone.words(pk=item.pk, viewer_id=viewer.user.pk)}
    return render_to_string("approvals/inbox.html#back", context)


def loaded(request_ids: list[int]) -> Change:
    """The named requests as the database has them now, for what the page says of them."""
    named = ApprovalRequest.objects.filter(pk__in=request_ids).select_related("decided_by")
    return Change.of(list(named) if request_ids else [], counts={})


@dataclass
class InboxView:
    """What one socket's page shows: its filters and the rows matching them, in inbox order."""

    viewer: Viewer
    filters: InboxFilter
    query: QueryDict
    order: dict[int, tuple[datetime, int]] = field(default_factory=dict)
    complete: bool = False  # order holds every matching row: pushes may be applied as changes

    def reset(self, items: list[ApprovalRequest], *, total: int) -> None:
        """Remember a full render's rows."""
        self.order = {i.pk: (i.created_at, i.pk) for i in items}
        # Past the limit a removal brings in a row never rendered; an age filter lets rows in as
        # time passes: both re-render from the database instead.
        self.complete = total <= INBOX_LIMIT and not self.filters.min_age_s

    def matches(self, item: ApprovalRequest) -> bool:
        return (
            item.queue not in self.viewer.closed
            and (not self.filters.queue or item.queue == self.filters.queue)
            and (not self.filters.agent or item.agent == self.filters.agent)
        )

    def apply(self, change: Change, request_ids: list[int]) -> str | None:
        """The swaps that bring the page up to date, or None if only a full render can."""
        was = self.order
        now = dict(was)
        for pk in request_ids:
            item = change.rows.get(pk)
            if item is not None and self.matches(item):
                now[pk] = (item.created_at, item.pk)
            else:
                now.pop(pk, None)
        if len(now) > INBOX_LIMIT:
            return None
        changed = set(request_ids)
        parts = []
        for pk in request_ids:
            if pk in was and pk not in now:
                parts.append(f'<div hx-swap-oob="delete:#approval-{pk}"></div>')
                parts.append(left_html(change, pk, viewer=self.viewer))
        previous = None
        for pk in sorted(now, key=now.__getitem__):
            if pk in changed:
                html = row_html(change, change.rows[pk], viewer=self.viewer, oob=pk in was)
                if pk not in was:  # after the row before it, or first in the list
                    where = f"afterend:#approval-{previous}" if previous else "afterbegin:#inbox-list"
                    html = f'<div hx-swap-oob="{where}">{html}</div>'
                    html += back_html(change, change.rows[pk], viewer=self.viewer)
                parts.append(html)
            previous = pk
        self.order = now
        return "".join(parts) + self.counts_html(change.counts, total=len(now))

    def changes_html(self, *, was: dict[int, Any], items: list[ApprovalRequest]) -> str:
        """After a full render (past the limit, a resync, new rights, a connect): why each row this
        socket had rendered is gone, and which rows came back by an undo. A connect had rendered
        none: the page names the rows it showed (gone_html), and hears only of the rows new to it
        that they came back."""
        gone = [pk for pk in was if pk not in self.order]
        parts = [self.gone_html(gone, named_by_page=False)] if gone else []
        back = [i for i in items if i.pk not in was]
        if back:
            change = Change(rows={i.pk: i for i in back}, closed={}, counts={})
            parts += [back_html(change, item, viewer=self.viewer) for item in back]
        return "".join(parts)

    def gone_html(self, gone: list[int], *, named_by_page: bool) -> str:
        """Why each of these rows is not in the list the socket last rendered. A row still
        pending that matches only fell past the limit: nothing is said. Ids a page named
        (`named_by_page`) are said only of rows in queues this viewer may see."""
        change = loaded(gone)
        parts = []
        for pk in gone:
            item = change.rows.get(pk) or change.closed.get(pk)
            if named_by_page and (item is None or item.queue not in self.viewer.visible):
                continue
            past_limit = pk in change.rows and self.matches(change.rows[pk])
            parts.append(left_html(change, pk, viewer=self.viewer, quiet=past_limit))
        return "".join(parts)

    def counts_html(self, counts: dict[str, tuple[int, int]], *, total: int) -> str:
        queues = selectors.counts_seen(counts, visible=self.viewer.visible, closed=self.viewer.closed)
        context = {
            "oob": True,
            "count": total,
            "queues": queues,
            "all_pending": sum(q.pending for q in queues),
            "filters": self.filters,
            "query": self.query,
            "can_read_ledger": self.viewer.can_read_ledger,
        }
        return render_to_string("approvals/inbox.html#count", context) + render_to_string(
            "approvals/inbox.html#queues", context
        )
