"""Threads: the list (and starting a run), one thread's page, and operators' controls."""

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from agents.actions import (
    InvalidInput,
    ThreadStateError,
    check_start_thread,
    do_start_thread,
    replay_warnings,
)
from agents.actions.control import NothingChanged
from agents.registry import registry
from approvals import selectors, thread_selectors
from approvals.access import Access
from approvals.actions.errors import NotAllowed
from approvals.actions.standing import access_standing, do_revoke_standing
from approvals.actions.threads import (
    access_thread,
    do_continue_thread,
    do_control,
    do_edit_state,
)
from approvals.conversation import NoSuchMessages
from approvals.http import AuthedRequest
from approvals.models import Policy
from approvals.thread_forms import ThreadFilterForm, parse_state
from checkpoints.backends.base import CheckpointError, CorruptCheckpoint
from checkpoints.models import Thread

PAGE_SIZE = 50
DONE_MESSAGES = {
    "pause": "Thread paused between steps.",
    "resume": "Thread resumed.",
    "cancel": "Thread cancelled.",
}


def _thread_or_404(request: AuthedRequest, thread_id: str) -> Thread:
    try:
        return access_thread(user=request.user, thread_id=thread_id)
    except Thread.DoesNotExist as exc:
        raise Http404("No such thread.") from exc


@require_http_methods(["GET", "POST"])
def threads(request: AuthedRequest) -> HttpResponse:
    if not Access.of(request.user).can_see_threads:
        raise PermissionDenied
    form = ThreadFilterForm(request.GET)
    page = Paginator(thread_selectors.filtered_threads(request.user, form.filters()), PAGE_SIZE)
    shown = page.get_page(request.GET.get("page"))
    shown.object_list = thread_selectors.annotate_page(list(shown.object_list))
    context: dict[str, Any] = {
        "filter_form": form,
        "page": shown,
        "query": request.GET.copy(),
        "agents": registry.all(),
        "can_start": Access.of(request.user).can_operate,
    }
    context["query"].pop("page", None)
    if request.method == "POST":
        return _start(request, context)
    template = "approvals/threads.html#results" if request.htmx else "approvals/threads.html"
    return render(request, template, context)


def _start(request: AuthedRequest, context: dict[str, Any]) -> HttpResponse:
    if not context["can_start"]:
        raise PermissionDenied
    tenant = request.POST.get("tenant", "").strip() or None  # blank: the agent's shared memory
    try:
        agent = check_start_thread(
            agent=request.POST.get("agent", ""),
            text=request.POST.get("input", ""),
            thread_id=None,
            tenant=tenant,
        )
    except InvalidInput as exc:
        context.update(errors=exc.errors, form=request.POST)
        return render(request, "approvals/threads.html", context, status=400)
    thread, _ = do_start_thread(
        agent=agent,
        text=request.POST["input"],
        thread_id=None,
        tenant=tenant,
        actor=f"user:{request.user.get_username()}",
    )
    return redirect("approvals:thread", thread_id=thread.id)


def thread_detail(request: AuthedRequest, thread_id: str) -> HttpResponse:
    thread = _thread_or_404(request, thread_id)
    try:
        context = selectors.thread_context(
            thread.id, messages_before=request.GET.get("messages_before") or None
        )
    except NoSuchMessages as exc:  # an earlier page the conversation does not have
        raise Http404(str(exc)) from exc
    try:
        context.update(
            thread_selectors.side_context(
                thread, request.user, history_before=request.GET.get("history_before") or None
            )
        )
    except CheckpointError as exc:  # an older page of the history after no checkpoint of this thread
        raise Http404(str(exc)) from exc
    return render(request, "approvals/thread.html", context)


@require_POST
def revoke_standing(request: AuthedRequest, thread_id: str, pk: int) -> HttpResponse:
    thread = _thread_or_404(request, thread_id)
    try:
        standing = access_standing(user=request.user, thread_id=thread.id, policy_id=pk)
    except PermissionError as exc:
        raise PermissionDenied(str(exc)) from exc
    except Policy.DoesNotExist as exc:
        raise Http404("No such standing decision on this thread.") from exc
    try:
        do_revoke_standing(standing, actor=request.user)
    except Policy.DoesNotExist:  # another revoke (a second reviewer, a double click) came first
        messages.info(request, f"Already revoked: {standing.name}.")
        return redirect("approvals:thread", thread_id=thread.id)
    messages.success(request, f"Revoked: {standing.name}. Calls of {standing.tool} go to a person again.")
    return redirect("approvals:thread", thread_id=thread.id)


@require_POST
def control(request: AuthedRequest, thread_id: str, verb: str) -> HttpResponse:
    thread = _thread_or_404(request, thread_id)
    if verb not in ("pause", "resume", "cancel"):
        raise Http404("No such action.")
    try:
        do_control(thread.id, user=request.user, verb=verb)
        messages.success(request, DONE_MESSAGES[verb])
    except NotAllowed as exc:
        raise PermissionDenied(str(exc)) from exc
    except ThreadStateError as exc:
        messages.error(request, str(exc))
    except CorruptCheckpoint as exc:  # resume reads the head, as the step would
        messages.error(request, _corrupt_head(exc))
    return redirect("approvals:thread", thread_id=thread.id)


def _corrupt_head(exc: CorruptCheckpoint) -> str:
    return f"Nothing was changed: {exc} Fork from the last good checkpoint."


@require_http_methods(["GET", "POST"])
def edit_state(request: AuthedRequest, thread_id: str) -> HttpResponse:
    thread = _thread_or_404(request, thread_id)
    if not Access.of(request.user).can_operate:
        raise PermissionDenied("Only operators and admins may edit a thread's state.")
    try:
        head = thread_selectors.checkpoint(thread, str(thread.head_id))
    except CorruptCheckpoint as exc:
        messages.error(request, f"The state cannot be edited: {exc} Fork from the last good checkpoint.")
        return redirect("approvals:thread", thread_id=thread.id)
    context: dict[str, Any] = {
        "thread": thread,
        "head": head,
        "text": thread_selectors.pretty(head.values, agent=thread.agent),
        "edit_note": thread_selectors.edit_note(thread.agent),
        "editable": thread_selectors.state_editable(thread.agent),
        # The edit re-asks the head's gates: a tool that ran there, its step never landed, runs again.
        "warnings": replay_warnings(thread.id, checkpoint_id=head.id),
    }
    if request.method == "POST":
        context["text"] = request.POST.get("values", "")
        # The head the operator's text was read at: if the thread moved on since (a step after a
        # pause, another operator's edit), saving the whole text would undo that, so it is a 409.
        context["seen_head"] = request.POST.get("head", "")[:64] or None
        try:
            do_edit_state(
                thread.id,
                user=request.user,
                values=parse_state(context["text"]),
                seen_head=context["seen_head"],
            )
        except InvalidInput as exc:
            context["errors"] = exc.errors
            return render(request, "approvals/state_edit.html", context, status=400)
        except ThreadStateError as exc:
            context["errors"] = {"status": str(exc)}
            return render(request, "approvals/state_edit.html", context, status=409)
        except NothingChanged as exc:
            messages.info(request, str(exc))
            return redirect("approvals:thread", thread_id=thread.id)
        messages.success(request, "State saved as a new checkpoint. Open approvals were asked again.")
        return redirect("approvals:thread", thread_id=thread.id)
    return render(request, "approvals/state_edit.html", context)


@require_POST
def continue_thread(request: AuthedRequest, thread_id: str) -> HttpResponse:
    thread = _thread_or_404(request, thread_id)
    try:
        do_continue_thread(thread.id, user=request.user, text=_message(request))
    except NotAllowed as exc:
        raise PermissionDenied(str(exc)) from exc
    except (InvalidInput, ThreadStateError) as exc:
        messages.error(request, str(exc))
    except CorruptCheckpoint as exc:  # the message would go on from a head that cannot be read
        messages.error(request, _corrupt_head(exc))
    return redirect("approvals:thread", thread_id=thread.id)


def _message(request: AuthedRequest) -> str:
    text = request.POST.get("input", "").strip()
    if not text:
        raise InvalidInput({"input": "write a message"})
    return text
