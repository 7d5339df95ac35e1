"""The two-person rule: a request a policy `require`s stays pending until N different reviewers
approve the arguments as they stand. An edit restarts the count with the edited arguments."""

import hashlib
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Prefetch

from approvals import events
from approvals.actions.audit import audit_request
from approvals.actions.errors import Conflict, NotAllowed
from approvals.models import ApprovalRequest, Signoff
from approvals.selectors import RequestRoute
from checkpoints.digest import canonical_json


class AlreadySignedOff(Conflict):
    """The reviewer already approved this request; another reviewer must. HTTP 409."""


class ArgumentsChanged(Conflict):
    """An approval of arguments an edit has replaced since the reviewer read them. HTTP 409."""


def needs_signoffs(request_: ApprovalRequest) -> bool:
    return request_.required_approvals > 1 or bool(request_.required_groups)


SIGNOFFS = Prefetch("signoffs", queryset=Signoff.objects.select_related("reviewer"))
"""For a list of requests: their signoffs and reviewers in one query (signoff_names reads it)."""


def signoff_names(request_: ApprovalRequest) -> list[str]:
    """Who approved so far, in order: from a list's SIGNOFFS prefetch, else in one query."""
    prefetched = "signoffs" in getattr(request_, "_prefetched_objects_cache", {})
    signoffs = request_.signoffs.all() if prefetched else request_.signoffs.select_related("reviewer")
    return [s.reviewer.get_username() for s in signoffs]


def describe_signoffs(request_: ApprovalRequest) -> str:
    """'1 of 2 approvals: rita' (or '0 of 2 approvals')."""
    names = signoff_names(request_)
    text = f"{len(names)} of {request_.required_approvals} approvals"
    return f"{text}: {', '.join(names)}" if names else text


def check_may_sign(request_: ApprovalRequest, *, reviewer: AbstractBaseUser) -> None:
    groups = request_.required_groups
    if not groups or getattr(reviewer, "is_superuser", False):
        return
    if not reviewer.groups.filter(name__in=groups).exists():  # type: ignore[attr-defined]
        raise NotAllowed(f"Approvals here must come from a member of: {', '.join(groups)}.")


def args_mark(args: Any) -> str:
    """A short mark of the arguments an approval is for (an edit under sign-off changes them): a
    page carries it with its Approve, so a sign-off counts only for the arguments its reviewer saw."""
    return hashlib.sha256(canonical_json(args).encode()).hexdigest()[:16]


def check_args_seen(request_: ApprovalRequest, *, seen_mark: str | None) -> None:
    """Refuse an approval given for arguments another reviewer's edit has replaced since."""
    if seen_mark is not None and seen_mark != args_mark(request_.effective_args):
        raise ArgumentsChanged(
            "The arguments were edited after you opened this request: read them again, then approve."
        )


def do_signoff(
    request_: ApprovalRequest, *, reviewer: AbstractBaseUser, edited_args: Any, seen: dict[str, Any]
) -> bool:
    """Record the reviewer's approval (or edit); return True once enough reviewers approved.
    Call with the thread and the request locked (lock_request), the request pending; `seen`:
    its facts (audit.request_facts) as the reviewer was shown them, before this changed them."""
    check_may_sign(request_, reviewer=reviewer)
    if edited_args is not None:
        # Earlier approvals were of other arguments: they no longer count.
        request_.signoffs.all().delete()
        request_.decision_args = edited_args
        request_.save(update_fields=["decision_args"])
    elif request_.signoffs.filter(reviewer_id=reviewer.pk).exists():
        raise AlreadySignedOff("You already approved this; it needs another reviewer's approval.")
    Signoff.objects.create(request=request_, reviewer=reviewer, args=edited_args)  # type: ignore[misc]
    count = request_.signoffs.count()
    audit_request(
        request_,
        actor=reviewer,
        action="decision.signoff",
        seen=seen,
        data={
            "args": edited_args,
            "approvals": count,
            "required": request_.required_approvals,
        },
    )
    if count >= request_.required_approvals:
        return True
    # Let the next reviewer take it: a claim would hold it for the one who already approved.
    request_.claimed_by, request_.claimed_at, request_.claim_active_at = None, None, None
    request_.save(update_fields=["claimed_by", "claimed_at", "claim_active_at"])
    route, queue = RequestRoute.of(request_), request_.queue

    def show_the_count() -> None:  # the inbox row, the status line, and the conversation's tag
        events.send_request_changed(request=route, queues=[queue])
        events.on_thread_changed(None, thread_id=route.thread_id)

    events.on_commit(show_the_count)
    return False
