"""The inbox, the decision page, and claiming."""

from dataclasses import replace
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from agents.actions import InvalidInput
from approvals import decision_page, selectors
from approvals.access import Access
from approvals.actions.claims import do_claim_op, do_touch_claim
from approvals.actions.decisions import ValidDecision, access_request, check_decision, do_decide
from approvals.actions.errors import Conflict, NotAllowed, ThreadDeleted
from approvals.actions.signoffs import args_mark
from approvals.actions.standing import check_standing, do_create_standing, parse_until
from approvals.actions.undo import do_undo
from approvals.conversation import NoSuchMessages
from approvals.forms import InboxFilterForm, args_from_post, edit_fields
from approvals.http import AuthedRequest
from approvals.models import ApprovalRequest
from approvals.selectors import InboxFilter


def inbox(request: AuthedRequest) -> HttpResponse:
    if not Access.of(request.user).can_see_threads:
        raise PermissionDenied
    form = InboxFilterForm(request.GET, queues=selectors.visible_queues(request.user))
    valid = form.is_valid()
    context = selectors.inbox_context(request.user, form.filters() if valid else InboxFilter())
    context.update(
        form=form,
        query=request.GET.copy() if valid else QueryDict(),
        can_claim=Access.of(request.user).is_reviewer,
        undo_s=settings.DECISION_UNDO_S,
        filter_errors=_filter_errors(form),
    )
    return render(request, "approvals/inbox.html", context, status=200 if valid else 400)


def _filter_errors(form: InboxFilterForm) -> list[str]:
    """Each refused filter as a sentence: 'Age: “9” is not one of the ages the list offers.'
    (the messages end in a full stop; the page adds none after)."""
    sentences = []
    for name, errors in form.errors.items():
        text = " ".join(str(e).strip() for e in errors)
        label = str(form.fields[name].label or name.capitalize()) if name in form.fields else "Filters"
        sentences.append(f"{label}: {text}" + ("" if text.endswith((".", "!", "?")) else "."))
    return sentences


def _item_or_404(request: AuthedRequest, pk: int) -> ApprovalRequest:
    try:
        return access_request(user=request.user, request_id=pk)
    except ApprovalRequest.DoesNotExist as exc:
        raise Http404("No such approval request.") from exc


def _moved_away(request: AuthedRequest, *, error: str, gone: bool = False) -> HttpResponse:
    """After an action on a request escalated meanwhile to a queue the user cannot see (the
    action refused it for that): a 403 saying why. After one on a request whose thread was
    deleted meanwhile (`gone`: the action's 409), or to htmx (a page in place of a fragment
    would land inside the page): the inbox, with the reason."""
    message = error or "This request moved to a queue you cannot see."
    if not (request.htmx or gone):
        raise PermissionDenied(message)
    messages.error(request, message)
    inbox = reverse("approvals:inbox")
    return HttpResponseClientRedirect(inbox) if request.htmx else redirect(inbox)


@require_http_methods(["GET", "POST"])
def decision(request: AuthedRequest, pk: int) -> HttpResponse:
    item = _item_or_404(request, pk)
    outcome: dict[str, Any] = {}
    if request.method == "POST":
        decided = _decide(request, item)
        if decided is None and not request.htmx:
            return redirect("approvals:inbox")
        outcome = decided or {}
        try:
            item = access_request(user=request.user, request_id=pk)
        except ApprovalRequest.DoesNotExist:
            return _moved_away(request, error=outcome.get("error", ""), gone=outcome.get("status") == 409)
    # A page of the conversation as asked (empty: the newest); a POST answers with the panel.
    asked_before = (request.GET.get("asked_before") or None) if request.method != "POST" else None
    try:
        context = decision_page.decision_context(item, user=request.user, asked_before=asked_before)
    except NoSuchMessages as exc:  # a page the conversation does not have: nothing touched
        raise Http404(str(exc)) from exc
    if request.method != "POST":
        do_touch_claim(item.pk, user=request.user)
    context.update(outcome)
    template = "approvals/decision.html#panel" if request.htmx else "approvals/decision.html"
    return render(request, template, context, status=context.get("status", 200))


def _decide(request: AuthedRequest, item: ApprovalRequest) -> dict[str, Any] | None:
    """Apply the POSTed decision; return error context, or None on success."""
    choice = request.POST.get("decision", "")
    args = args_from_post(item, request.POST) if choice == "edit" else None
    scope = request.POST.get("standing", "")
    try:
        valid = check_decision(
            item, user=request.user, decision=choice, args=args, message=request.POST.get("message", "")
        )
        # Without the page's mark (an inbox row's `a`), what the reviewer read is the proposal
        # every row shows: an approval of arguments a reviewer edited since is refused, not counted.
        valid = replace(valid, args_seen=request.POST.get("args_seen") or args_mark(item.args))
        if scope:
            _decide_and_stand(request, item, valid=valid, scope=scope)
        else:
            do_decide(item, reviewer=request.user, valid=valid)
    except NotAllowed as exc:
        return {"error": str(exc), "status": 403}
    except InvalidInput as exc:
        return {
            "errors": exc.errors,
            "chosen": choice,
            "status": 400,
            "message": request.POST.get("message", ""),
            "standing": scope,  # the standing form as it was sent
            "until": request.POST.get("until", ""),
            "fields": edit_fields(item, values=args, errors=exc.errors)
            if args is not None
            else edit_fields(item),
        }
    except Conflict as exc:
        return {"error": str(exc), "status": 409}
    if not request.htmx:  # an htmx answer is the panel, which says it; a flash would wait for another page
        messages.success(request, f"Decision recorded: {choice} {item.action}.")
    return None


def _decide_and_stand(
    request: AuthedRequest, item: ApprovalRequest, *, valid: ValidDecision, scope: str
) -> None:
    """Approve, and approve the tool (or these arguments) for the rest of the thread."""
    if valid.decision != "approve":
        raise InvalidInput({"standing": "a standing decision goes with an approval"})
    until = parse_until(request.POST.get("until", ""))
    when = check_standing(item, user=request.user, scope=scope, until=until)
    # Not one transaction: do_decide commits what it must even when it refuses (a superseded
    # request); it raises then, so no standing decision follows a decision that was not made.
    do_decide(item, reviewer=request.user, valid=valid)
    do_create_standing(item, reviewer=request.user, scope=scope, when=when, until=until)


def _back_to(request: AuthedRequest, *, fallback: str) -> str:
    """The page a form's `next` names, if it is a path on this site (what the forms send), else
    `fallback`. Not any relative text: redirect() takes "0" or "inbox" for a view's name (a 500)."""
    target = request.POST.get("next", "")
    if target.startswith("/") and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return fallback


@require_POST
def undo(request: AuthedRequest, pk: int) -> HttpResponse:
    """Take back a decision inside its undo window; answer with the decision panel."""
    item = _item_or_404(request, pk)
    gone = False
    try:
        do_undo(item.pk, user=request.user)
        messages.success(request, "Decision undone: the request is pending again.")
    except NotAllowed as exc:
        if not request.htmx:  # to htmx, the page below says why (a 403 page would land inside it)
            raise PermissionDenied(str(exc)) from exc
        messages.error(request, str(exc))
    except Conflict as exc:
        messages.error(request, str(exc))
        gone = isinstance(exc, ThreadDeleted)  # its page went with it: the inbox says why
    if gone:
        target = reverse("approvals:inbox")
    else:
        target = _back_to(request, fallback=reverse("approvals:decision", args=[item.pk]))
    # htmx (a panel a push rendered has no CSRF field; htmx sends the header): reload the page.
    return HttpResponseClientRedirect(target) if request.htmx else redirect(target)


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
    try:
        item = access_request(user=request.user, request_id=pk)
    except ApprovalRequest.DoesNotExist:
        return _moved_away(request, error=error, gone=status == 409)
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect(_back_to(request, fallback=reverse("approvals:decision", args=[item.pk])))
    context = {**selectors.status_context(item, request.user), "claim_error": error, "user": request.user}
    if request.htmx.target == f"approval-{item.pk}":
        context["can_claim"] = Access.of(request.user).is_reviewer
        selectors.with_asked_messages([item])
        return render(request, "approvals/inbox.html#row", context, status=status)
    return render(request, "approvals/decision.html#status", context, status=status)
