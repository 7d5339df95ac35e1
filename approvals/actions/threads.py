"""Operators' actions on threads, permission-checked and audited in one transaction."""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, User
from django.db import transaction

from agents import actions as agent_actions
from approvals import events
from approvals.access import Access
from approvals.actions.audit import appended_last, do_audit
from approvals.actions.errors import NotAllowed
from approvals.actions.standing import do_delete_standing_decisions
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.selectors import RequestRoute
from checkpoints import selectors as checkpoint_selectors
from checkpoints.backends import get_backend
from checkpoints.backends.base import ThreadData, ThreadNotFound
from checkpoints.diff import diff_values, summary
from checkpoints.models import Checkpoint, Thread


def access_thread(*, user: User, thread_id: str) -> Thread:
    """Fetch a thread the user may read, or raise Thread.DoesNotExist."""
    thread = checkpoint_selectors.thread(thread_id)
    if not Access.of(user).can_see_thread(thread.pk):
        raise Thread.DoesNotExist
    return thread


def _actor(user: User) -> str:
    return f"user:{user.get_username()}"


def do_control(thread_id: str, *, user: User, verb: str) -> ThreadData:
    """Pause, resume or cancel a thread."""
    Access.of(user).require_operator(verb)
    action = {
        "pause": agent_actions.do_pause,
        "resume": agent_actions.do_resume,
        "cancel": agent_actions.do_cancel,
    }[verb]
    with transaction.atomic():
        thread = action(thread_id, actor=_actor(user))
        data: dict[str, Any] = {"status": thread.status}
        if thread.head_id:  # the state the person saw: the ledger keeps its digest
            seen = get_backend().summary(thread_id=thread_id, checkpoint_id=thread.head_id)
            data["state_digest"] = seen.digest
        do_audit(
            actor=user,
            action=f"thread.{verb}",
            thread_id=thread_id,
            checkpoint_id=thread.head_id or "",
            data=data,
        )
    return thread


def do_edit_state(
    thread_id: str, *, user: User, values: dict[str, Any], seen_head: str | None = None
) -> agent_actions.Written:
    """Write an `update` checkpoint with the operator's values; audit the diff. `seen_head`: the
    head they were edited from (a 409 if the thread moved on since)."""
    Access.of(user).require_operator("edit the state of")
    with transaction.atomic():
        written = agent_actions.do_update_state(
            thread_id, values=values, actor=_actor(user), seen_head=seen_head
        )
        _audit_write(user, "thread.update", written)
    return written


def do_fork_thread(
    thread_id: str, *, user: User, checkpoint_id: str, values: dict[str, Any] | None
) -> agent_actions.Written:
    """Branch from a checkpoint (optionally edited); audit the diff against the origin."""
    Access.of(user).require_operator("fork")
    with transaction.atomic():
        written = agent_actions.do_fork(
            thread_id, checkpoint_id=checkpoint_id, values=values, actor=_actor(user)
        )
        _audit_write(user, "thread.fork", written, extra={"from_checkpoint": checkpoint_id})
    return written


def do_continue_thread(thread_id: str, *, user: User, text: str) -> agent_actions.Written:
    """Add a user message to a finished thread."""
    Access.of(user).require_operator("continue")
    agent_actions.check_input_text(text)  # the same rule as at start, whichever way it came
    with transaction.atomic():
        written = agent_actions.do_continue(thread_id, text=text, actor=_actor(user))
        _audit_write(user, "thread.message", written)
    return written


def _audit_write(
    user: User, action: str, written: agent_actions.Written, extra: dict[str, Any] | None = None
) -> None:
    seen = written.parent  # what the person changed
    changes = diff_values(seen.values, written.checkpoint.values)
    do_audit(
        actor=user,
        action=action,
        thread_id=written.thread.id,
        checkpoint_id=written.checkpoint.id,
        data={
            **summary(changes),
            "state_digest": written.checkpoint.digest,
            "seen_digest": seen.digest,
            "previous_head": written.previous_head,
            **(extra or {}),
        },
    )


def do_delete_thread(thread_id: str, *, user: User) -> None:
    """Delete a thread with its checkpoints, requests and standing decisions (an admin's, in
    Django admin)."""
    if not Access.of(user).is_admin:
        raise NotAllowed("Only admins may delete threads.")
    with transaction.atomic(), appended_last():
        try:
            thread = get_backend().lock_thread(thread_id=thread_id)
        except ThreadNotFound:
            return  # another admin deleted it first: nothing is left to delete or record
        delete_locked_thread(thread, user=user)


def delete_locked_thread(
    thread: ThreadData, *, user: AbstractBaseUser, why: dict[str, Any] | None = None
) -> None:
    """Delete a thread locked in this transaction (by `user`, whose right the caller checked);
    the ledger keeps who did it, `why`, and what went: its agent, status, head state's digest,
    checkpoints, the requests still pending and the standing decisions."""
    thread_id = thread.id
    pending = list(
        ApprovalRequest.objects.filter(thread_id=thread_id, status=ApprovalStatus.PENDING).order_by("pk")
    )
    data: dict[str, Any] = {
        "agent": thread.agent,
        "status": thread.status,
        "checkpoints": Checkpoint.objects.filter(thread_id=thread_id).count(),
        "pending_requests": [r.pk for r in pending],
        **(why or {}),
    }
    if thread.head_id:
        data["state_digest"] = get_backend().summary(thread_id=thread_id, checkpoint_id=thread.head_id).digest
    routes = [RequestRoute.of(r) for r in pending]
    if standing := do_delete_standing_decisions(thread_id, actor=user):
        data["standing_decisions"] = standing
    get_backend().delete_thread(thread_id=thread_id)
    events.on_commit(lambda: events.send_requests_closed(requests=routes))  # off open inboxes
    deleted_by = user.get_username()
    # Open thread and decision pages would otherwise stay silently stale, buttons and all.
    events.on_commit(lambda: events.send_thread_deleted(thread_id=thread_id, deleted_by=deleted_by))
    do_audit(
        actor=user,
        action="thread.delete",
        thread_id=thread_id,
        checkpoint_id=thread.head_id or "",
        data=data,
    )
