"""Thread endpoints: start, read."""

from datetime import date
from typing import Annotated, Any

from ninja import Body, Query, Router, Status
from ninja.errors import HttpError
from pydantic import Field

from agents.actions import check_start_thread, do_start_thread
from agents.actions.control import HeadMoved, NothingChanged
from agents.loading import load_checkpoint
from approvals import thread_selectors
from approvals.access import Access
from approvals.actions.threads import (
    access_thread,
    do_continue_thread,
    do_control,
    do_edit_state,
    do_fork_thread,
)
from approvals.actions.transfer import InvalidExport, check_import, do_import_thread, export_thread
from approvals.api.base import Error
from approvals.api.schemas import ApprovalOut, StartThreadIn, ThreadOut
from approvals.api.thread_schemas import (
    ChangeOut,
    CheckpointOut,
    ForkIn,
    MessageIn,
    StateIn,
    ThreadSummaryOut,
)
from approvals.http import AuthedRequest
from approvals.models import ApprovalStatus
from approvals.thread_selectors import HISTORY_LIMIT, ThreadFilters
from checkpoints.backends.base import ThreadData, ThreadExists
from checkpoints.models import Thread, ThreadStatus
from checkpoints.store import tenant_of

router = Router(tags=["threads"])
MAX_Q_CHARS = 200  # as the thread list page's search box; a longer search is a 400, not a slow scan
MAX_OFFSET = 1_000_000_000  # far past any list anyone pages through; a bigint OFFSET would overflow


def _access(request: AuthedRequest, thread_id: str) -> Thread:
    try:
        return access_thread(user=request.user, thread_id=thread_id)
    except Thread.DoesNotExist as exc:
        raise HttpError(404, f"Thread {thread_id!r} does not exist.") from exc


def _thread_out(thread_id: str, request: AuthedRequest) -> ThreadOut:
    thread = _access(request, thread_id)
    pending = thread.approval_requests.filter(status=ApprovalStatus.PENDING).select_related("decided_by")
    return _out(
        thread,
        head=str(thread.head_id) if thread.head_id else None,
        values=load_checkpoint(thread_id=thread.id, agent=thread.agent).values if thread.head_id else {},
        pending=[
            ApprovalOut.from_request(r) for r in pending if Access.of(request.user).can_see_queue(r.queue)
        ],
    )


def _out(
    thread: Thread | ThreadData, *, head: str | None, values: dict[str, Any], pending: list[ApprovalOut]
) -> ThreadOut:
    return ThreadOut(
        id=thread.id,
        agent=thread.agent,
        status=thread.status,
        head=head,
        values=values,
        pending_approvals=pending,
        error=thread.error,
        offline_model=bool(thread.metadata.get("offline_model")),
        tenant=tenant_of(thread),
        created_at=thread.created_at,
        updated_at=thread.updated_at,
    )


@router.post("/threads", response={201: ThreadOut, 400: Error, 403: Error, 409: Error})
def start_thread(request: AuthedRequest, body: StartThreadIn) -> Any:
    if not Access.of(request.user).can_operate:
        return Status(403, {"detail": "Only operators and admins may start threads."})
    agent = check_start_thread(
        agent=body.agent, text=body.input, thread_id=body.thread_id, tenant=body.tenant
    )
    try:
        thread, first = do_start_thread(
            agent=agent,
            text=body.input,
            thread_id=body.thread_id,
            tenant=body.tenant,
            actor=f"user:{request.user.get_username()}",
        )
    except ThreadExists as exc:
        return Status(409, {"detail": str(exc)})
    # The thread as created, without reading it back: nothing is pending at its first checkpoint.
    return Status(201, _out(thread, head=first.id, values=first.values, pending=[]))


@router.get("/threads/{thread_id}", response={200: ThreadOut, 403: Error, 404: Error})
def get_thread(request: AuthedRequest, thread_id: str) -> Any:
    return _thread_out(thread_id, request)


@router.get("/threads", response={200: list[ThreadSummaryOut]})
def list_threads(
    request: AuthedRequest,
    agent: Annotated[str, Field(max_length=100)] = "",
    status: ThreadStatus | None = None,  # a status that is none of them is a 400, not no threads
    created_after: date | None = None,
    created_before: date | None = None,
    decided_by: Annotated[str, Field(max_length=150)] = "",
    q: Annotated[str, Field(max_length=MAX_Q_CHARS)] = "",
    limit: int = 50,
    offset: Annotated[int, Field(ge=0, le=MAX_OFFSET)] = 0,
) -> Any:
    filters = ThreadFilters(
        agent=agent,
        status=status or "",
        created_after=created_after,
        created_before=created_before,
        decided_by=decided_by,
        q=q,
    )
    limit = max(1, min(limit, 500))
    rows = thread_selectors.filtered_threads(request.user, filters)[offset : offset + limit]
    return [ThreadSummaryOut.from_thread(t) for t in rows]


@router.get("/threads/{thread_id}/history", response={200: list[CheckpointOut], 404: Error})
def history(request: AuthedRequest, thread_id: str, limit: int = HISTORY_LIMIT, before: str = "") -> Any:
    """Newest first, `limit` a page (at most 1,000); the next page is the one `before` the last."""
    thread = _access(request, thread_id)
    page = thread_selectors.history_list(thread, limit=limit, before=before or None)
    return [CheckpointOut.from_data(c) for c in page]


@router.get("/threads/{thread_id}/checkpoints/{checkpoint_id}", response={200: CheckpointOut, 404: Error})
def checkpoint(request: AuthedRequest, thread_id: str, checkpoint_id: str) -> Any:
    thread = _access(request, thread_id)
    return CheckpointOut.from_data(thread_selectors.checkpoint(thread, checkpoint_id))


@router.get("/threads/{thread_id}/diff", response={200: list[ChangeOut], 404: Error})
def diff(request: AuthedRequest, thread_id: str, from_: str = Query(..., alias="from"), to: str = "") -> Any:
    thread = _access(request, thread_id)
    changes = thread_selectors.diff_between(thread, from_id=from_, to_id=to or str(thread.head_id))
    return [ChangeOut(kind=c.kind, path=c.path, old=c.old, new=c.new) for c in changes]


def _control(request: AuthedRequest, thread_id: str, verb: str) -> ThreadOut:
    _access(request, thread_id)
    do_control(thread_id, user=request.user, verb=verb)
    return _thread_out(thread_id, request)


CONTROL = {200: ThreadOut, 403: Error, 404: Error, 409: Error}


@router.post("/threads/{thread_id}/pause", response=CONTROL)
def pause(request: AuthedRequest, thread_id: str) -> Any:
    return _control(request, thread_id, "pause")


@router.post("/threads/{thread_id}/resume", response=CONTROL)
def resume(request: AuthedRequest, thread_id: str) -> Any:
    return _control(request, thread_id, "resume")


@router.post("/threads/{thread_id}/cancel", response=CONTROL)
def cancel(request: AuthedRequest, thread_id: str) -> Any:
    return _control(request, thread_id, "cancel")


@router.patch(
    "/threads/{thread_id}/state", response={200: ThreadOut, 400: Error, 403: Error, 404: Error, 409: Error}
)
def edit_state(
    request: AuthedRequest, thread_id: str, body: StateIn, head: Annotated[str, Field(max_length=64)] = ""
) -> Any:
    """Merge `values` into the head's state as an `update` checkpoint. Values that change nothing
    are a 409 (as for any action the thread's state makes moot): nothing was written. `head`
    (optional): the head the client read the state at; a 409 if the thread moved on since."""
    thread = _access(request, thread_id)
    current = thread_selectors.checkpoint(thread, str(thread.head_id))
    try:
        # Merged into the head read here (or the client's): if the thread moved on before the
        # write (another edit, a step committing after a pause), writing would undo that: a 409.
        do_edit_state(
            thread_id,
            user=request.user,
            values={**current.values, **body.values},
            seen_head=head or current.id,
        )
    except (NothingChanged, HeadMoved) as exc:
        return Status(409, {"detail": str(exc)})
    return _thread_out(thread_id, request)


@router.post(
    "/threads/{thread_id}/fork", response={200: ThreadOut, 400: Error, 403: Error, 404: Error, 409: Error}
)
def fork(request: AuthedRequest, thread_id: str, body: ForkIn) -> Any:
    _access(request, thread_id)
    do_fork_thread(thread_id, user=request.user, checkpoint_id=body.checkpoint_id, values=body.values)
    return _thread_out(thread_id, request)


@router.post(
    "/threads/{thread_id}/messages", response={200: ThreadOut, 400: Error, 403: Error, 404: Error, 409: Error}
)
def add_message(request: AuthedRequest, thread_id: str, body: MessageIn) -> Any:
    _access(request, thread_id)
    do_continue_thread(thread_id, user=request.user, text=body.input)
    return _thread_out(thread_id, request)


@router.get("/threads/{thread_id}/export", response={200: dict[str, Any], 404: Error})
def export(request: AuthedRequest, thread_id: str, branch: str | None = None) -> Any:
    """The thread (or the branch ending at `branch`) as a JSON document for import or replay_thread.
    An unknown branch is a 404."""
    return export_thread(_access(request, thread_id), branch=branch)


@router.post("/imports", response={201: ThreadOut, 400: Error, 403: Error, 409: Error})
def import_thread(
    request: AuthedRequest, body: dict[str, Any] = Body(...), thread_id: str | None = None
) -> Any:
    """Recreate an exported thread here (optionally under a new id)."""
    if not Access.of(request.user).can_operate:
        return Status(403, {"detail": "Only operators and admins may import threads."})
    try:
        valid = check_import(body, thread_id=thread_id)
        thread = do_import_thread(valid, user=request.user)
    except InvalidExport as exc:
        return Status(400, {"detail": str(exc)})
    except ThreadExists as exc:
        return Status(409, {"detail": f"{exc} Import it under another id with ?thread_id=."})
    return Status(201, _thread_out(thread.id, request))
