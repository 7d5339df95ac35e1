"""The inbox, the decision page, and claiming."""

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from agents.actions import InvalidInput
from approvals import permissions, roles, selectors
from approvals.actions.claims import do_claim_op, do_touch_claim
from approvals.actions.decisions import access_request, check_decision, do_decide
from approvals.actions.errors import Conflict, NotAllowed
from approvals.forms import InboxFilterForm, args_from_post, edit_fields
from approvals.http import AuthedRequest
from approvals.models import ApprovalRequest
from approvals.selectors import InboxFilter


def inbox(request: AuthedRequest) -> HttpResponse:
    if not permissions.can_see_threads(request.user):
        raise PermissionDenied
    form = InboxFilterForm(request.GET, queues=selectors.visible_queues(request.user))
    valid = form.is_valid()
    context = selectors.inbox_context(request.user, form.filters() if valid else InboxFilter())
    context.update(
        form=form,
        query=request.GET.copy() if valid else QueryDict(),
        can_claim=roles.is_reviewer(request.user),
    )
    return render(request, "approvals/inbox.html", context, status=200 if valid else 400)


def _item_or_404(request: AuthedRequest, pk: int) -> ApprovalRequest:
    try:
        return access_request(user=request.user, request_id=pk)
    except ApprovalRequest.DoesNotExist as exc:
        raise Http404("No such approval request.") from exc


@require_http_methods(["GET", "POST"])
def decision(request: AuthedRequest, pk: int) -> HttpResponse:
    item = _item_or_404(request, pk)
    context: dict[str, Any] = {"item": item, "fields": edit_fields(item)}
    if request.method == "POST":
        outcome = _decide(request, item)
        if outcome is None and not request.htmx:
            return redirect("approvals:inbox")
        context.update(outcome or {})
        item = access_request(user=request.user, request_id=pk)
    else:
        do_touch_claim(item.pk, user=request.user)
    context.update(selectors.status_context(item, request.user))
    context.update(selectors.neighbours(request.user, item), **selectors.proposal_context(item))
    context.update(selectors.thread_context(item.thread_id))
    template = "approvals/decision.html#panel" if request.htmx else "approvals/decision.html"
    return render(request, template, context, status=context.get("status", 200))


def _decide(request: AuthedRequest, item: ApprovalRequest) -> dict[str, Any] | None:
    """Apply the POSTed decision; return error context, or None on success."""
    choice = request.POST.get("decision", "")
    args = args_from_post(item, request.POST) if choice == "edit" else None
    try:
        valid = check_decision(
            item, user=request.user, decision=choice, args=args, message=request.POST.get("message", "")
        )
        do_decide(item.pk, reviewer=request.user, valid=valid)
    except NotAllowed as exc:
        return {"error": str(exc), "status": 403}
    except InvalidInput as exc:
        return {
            "errors": exc.errors,
            "chosen": choice,
            "status": 400,
            "message": request.POST.get("message", ""),
            "fields": edit_fields(item, values=args, errors=exc.errors)
            if args is not None
            else edit_fields(item),
        }
    except Conflict as exc:
        return {"error": str(exc), "status": 409}
    messages.success(request, f"Decision recorded: {choice} {item.action}.")
    return None


@require_POST
def claim(request: AuthedRequest, pk: int) -> HttpResponse:
    """Claim, release or (admins) reassign a request; answer with the row or status line it came from."""
    item = _item_or_404(request, pk)
    error, status = "", 200
    try:
        do_claim_op(
            item, user=request.user, op=request.POST.get("op", "claim"), to=request.POST.get("to", "")
        )
    except NotAllowed as exc:
        error, status = str(exc), 403
    except Conflict as exc:
        error, status = str(exc), 409
    except InvalidInput as exc:
        error, status = "; ".join(f"{k}: {v}" for k, v in exc.errors.items()), 400
    item = access_request(user=request.user, request_id=pk)
    if not request.htmx:
        if error:
            messages.error(request, error)
        target = request.POST.get("next", "")
        if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
            target = reverse("approvals:decision", args=[item.pk])
        return redirect(target)
    context = {**selectors.status_context(item, request.user), "claim_error": error, "user": request.user}
    if request.htmx.target == f"approval-{item.pk}":
        context["can_claim"] = roles.is_reviewer(request.user)
        return render(request, "approvals/inbox.html#row", context, status=status)
    return render(request, "approvals/decision.html#status", context, status=status)
