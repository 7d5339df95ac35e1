"""The audit ledger for admins: read and filter it, export it as CSV, verify the chain."""

import csv
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone

from approvals.access import Access
from approvals.actions.ledger import LedgerFilter, csv_rows, filtered_events, verify_ledger
from approvals.forms import LedgerFilterForm
from approvals.http import AuthedRequest
from approvals.models import AuditEvent, Policy
from checkpoints import selectors as checkpoint_selectors

PAGE_SIZE = 50


def _filters(request: AuthedRequest) -> tuple[LedgerFilterForm, LedgerFilter | None]:
    if not Access.of(request.user).can_read_ledger:
        raise PermissionDenied("Only admins may read the audit ledger.")
    form = LedgerFilterForm(request.GET)
    return form, form.filters() if form.is_valid() else None


def ledger(request: AuthedRequest) -> HttpResponse:
    form, filters = _filters(request)
    query = request.GET.copy()
    query.pop("page", None)
    context: dict[str, Any] = {"form": form, "query": query}
    if filters is not None:
        context["page"] = page = Paginator(filtered_events(filters), PAGE_SIZE).get_page(
            request.GET.get("page")
        )
        # Their events stay; their links would lead nowhere.
        context["deleted_threads"] = checkpoint_selectors.missing_threads(
            {e.thread_id for e in page if e.thread_id}
        )
        context["live_policies"] = _live_policies(page)
    if request.GET.get("verify"):
        context["report"] = verify_ledger()
    template = "approvals/ledger.html#results" if request.htmx else "approvals/ledger.html"
    return render(request, template, context, status=200 if filters is not None else 400)


def _live_policies(events: Iterable[AuditEvent]) -> set[int]:
    """The policies the events name (a policy's change, decision or failure) that still exist:
    their entries link to them; a deleted one's name and version stay in the entry."""
    named = {p.get("id") for e in events if isinstance(p := e.data.get("policy"), dict)}
    ids = {i for i in named if isinstance(i, int)}
    return set(Policy.objects.filter(pk__in=ids).values_list("pk", flat=True)) if ids else set()


class _Echo:
    def write(self, value: str) -> str:
        return value


def ledger_csv(request: AuthedRequest) -> HttpResponseBase:
    form, filters = _filters(request)
    if filters is None:
        errors = "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items())
        return HttpResponse(f"Bad filter: {errors}\n", status=400, content_type="text/plain")
    writer = csv.writer(_Echo())
    rows = (writer.writerow(row) for row in csv_rows(filtered_events(filters)))
    response = StreamingHttpResponse(rows, content_type="text/csv; charset=utf-8")
    name = f"gatehouse-ledger-{timezone.now():%Y%m%d-%H%M%S}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
