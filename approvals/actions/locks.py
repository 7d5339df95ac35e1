"""The lock order every action on a request takes: its thread, then the request. Permissions and
state are checked on the rows these return, never on earlier reads."""

from approvals import rows
from approvals.actions.errors import ThreadDeleted
from approvals.models import ApprovalRequest
from checkpoints.backends import get_backend
from checkpoints.backends.base import ThreadData, ThreadNotFound


def lock_request(request_id: int, *, thread_id: str) -> tuple[ThreadData, ApprovalRequest]:
    """Lock the request's thread (a request never changes thread), then the request, and return
    both as they are now. ThreadDeleted if an admin deleted the thread meanwhile."""
    try:
        thread = get_backend().lock_thread(thread_id=thread_id)
    except ThreadNotFound as exc:  # deleted after the caller read the request: a lost race, no 500
        raise ThreadDeleted from exc
    request_ = rows.request_with(request_id, related=("decided_by", "claimed_by"), lock=True)
    if request_ is None:
        raise ThreadDeleted
    return thread, request_


def lock_request_by_id(request_id: int) -> tuple[ThreadData, ApprovalRequest]:
    """lock_request for a caller that holds only the request's id (its thread read first)."""
    thread_id = ApprovalRequest.objects.filter(pk=request_id).values_list("thread_id", flat=True).first()
    if thread_id is None:
        raise ThreadDeleted  # the request went with its thread
    return lock_request(request_id, thread_id=thread_id)
