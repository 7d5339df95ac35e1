"""Time travel: one checkpoint (state, diff against its parent, fork), and a diff of any two."""

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from agents.actions import InvalidInput, ThreadStateError, registered_agent, replay_warnings
from agents.actions.control import check_fork
from approvals import effects, thread_selectors
from approvals.access import Access
from approvals.actions.errors import NotAllowed
from approvals.actions.threads import access_thread, do_fork_thread
from approvals.http import AuthedRequest
from approvals.thread_forms import parse_state
from checkpoints.backends.base import CheckpointError
from checkpoints.diff import diff_values
from checkpoints.digest import canonical_json
from checkpoints.models import Thread

CHANGES_PAGE = 200


def _thread_or_404(request: AuthedRequest, thread_id: str) -> Thread:
    try:
        return access_thread(user=request.user, thread_id=thread_id)
    except Thread.DoesNotExist as exc:
        raise Http404("No such thread.") from exc


@require_http_methods(["GET", "POST"])
def checkpoint_detail(request: AuthedRequest, thread_id: str, checkpoint_id: str) -> HttpResponse:
    thread = _thread_or_404(request, thread_id)
    try:
        item = thread_selectors.checkpoint(thread, checkpoint_id)
    except CheckpointError as exc:
        raise Http404(str(exc)) from exc
    try:
        history = thread_selectors.history_context(thread, before=request.GET.get("history_before") or None)
    except CheckpointError as exc:
        raise Http404(str(exc)) from exc
    context: dict[str, Any] = {
        "thread": thread,
        "item": item,
        "state": thread_selectors.pretty(item.values, agent=thread.agent),
        "changes": thread_selectors.diff_against_parent(item),
        "warnings": replay_warnings(thread.id, checkpoint_id=item.id),
        "thread_effects": effects.thread_effects(thread.id),
        "can_operate": Access.of(request.user).can_operate,
        "fork_note": thread_selectors.fork_note(thread.agent),
        **history,
        "text": thread_selectors.pretty(item.values, agent=thread.agent),
    }
    if request.method == "POST":
        return _fork(request, thread, item.id, context)
    return render(request, "approvals/checkpoint.html", context)


def _fork(
    request: AuthedRequest, thread: Thread, checkpoint_id: str, context: dict[str, Any]
) -> HttpResponse:
    """Two steps: preview (what the edits change, what may run again), then confirm. The state
    in the form is what the fork starts from: edited, it is used; unchanged, the origin's."""
    context["text"] = request.POST.get("values", context["text"])
    try:
        values = parse_state(context["text"])
        # As JSON: to Python 1 == 1.0 == True, and changing one to another is an edit.
        edited = canonical_json(values) != canonical_json(context["item"].values)
        if not request.POST.get("confirm"):
            # The fork's own checks, the agent's refusals of an edit included: what the confirm
            # would refuse, the preview refuses in the same words.
            agent = registered_agent(thread.agent, verb="fork")
            check_fork(agent, origin=context["item"].values, values=values if edited else None)
            context["preview"] = {"edited": edited, "changes": diff_values(context["item"].values, values)}
            return render(request, "approvals/checkpoint.html", context)
        do_fork_thread(
            thread.id, user=request.user, checkpoint_id=checkpoint_id, values=values if edited else None
        )
    except NotAllowed as exc:
        raise PermissionDenied(str(exc)) from exc
    except InvalidInput as exc:
        context["errors"] = exc.errors
        return render(request, "approvals/checkpoint.html", context, status=400)
    except ThreadStateError as exc:
        context["errors"] = {"status": str(exc)}
        return render(request, "approvals/checkpoint.html", context, status=409)
    said = "with your edits" if edited else "as it was"
    messages.success(request, f"Forked {said}: a new branch starts here and the thread runs on from it.")
    return redirect("approvals:thread", thread_id=thread.id)


def diff(request: AuthedRequest, thread_id: str) -> HttpResponse:
    thread = _thread_or_404(request, thread_id)
    checkpoints = thread_selectors.history_list(thread)
    from_id = request.GET.get("from") or (checkpoints[-1].id if checkpoints else "")
    to_id = request.GET.get("to") or (str(thread.head_id) if thread.head_id else "")
    try:
        changes = thread_selectors.diff_between(thread, from_id=from_id, to_id=to_id)
    except CheckpointError as exc:
        return render(
            request,
            "approvals/diff.html",
            {"thread": thread, "checkpoints": checkpoints, "error": str(exc)},
            status=404,
        )
    # Distant checkpoints can differ in thousands of places: a page of them at a time.
    page = Paginator(changes, CHANGES_PAGE).get_page(request.GET.get("page"))
    context = {
        "thread": thread,
        "checkpoints": checkpoints,
        "from_id": from_id,
        "to_id": to_id,
        "changes": page.object_list,
        "page": page,
        "query": urlencode({"from": from_id, "to": to_id}),
    }
    return render(request, "approvals/diff.html", context)
