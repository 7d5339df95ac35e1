"""Approval endpoints: list, decide, claim."""

from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any

from django.db.models import Q, QuerySet
from ninja import Router, Status
from pydantic import Field

from approvals.access import Access
from approvals.actions.claims import do_claim_op
from approvals.actions.decisions import access_request, check_decision, do_decide
from approvals.actions.errors import Conflict, NotAllowed
from approvals.actions.signoffs import SIGNOFFS, args_mark
from approvals.actions.undo import do_undo
from approvals.api.base import Error
from approvals.api.schemas import ApprovalOut, ClaimIn, DecisionIn
from approvals.http import AuthedRequest
from approvals.models import ApprovalRequest, ApprovalStatus

router = Router(tags=["approvals"])
PAGE = 500
RequestId = Annotated[int | None, Field(ge=1, le=2**63 - 1)]  # a larger id would overflow the query


@router.get("/approvals", response={200: list[ApprovalOut], 400: Error})
def list_approvals(
    request: AuthedRequest,
    status: Annotated[str, Field(max_length=20)] = "pending",
    queue: Annotated[str, Field(max_length=64)] = "",
    limit: int = PAGE,
    before: RequestId = None,
    after: RequestId = None,
) -> Any:
    """Pending requests oldest first (the queue's order; the next page is `after` the last),
    others newest first (recent decisions, by when decided; the next page is `before` the last)."""
    if status not in ApprovalStatus.values:
        return Status(400, {"detail": f"status must be one of: {', '.join(ApprovalStatus.values)}"})
    visible = Access.of(request.user).visible_requests(ApprovalRequest.objects.all())
    rows = visible.filter(status=status)
    if queue:
        rows = rows.filter(queue=queue)
    # Superseded requests were mostly never decided: they keep the order they were raised in.
    key = "created_at" if status in (ApprovalStatus.PENDING, ApprovalStatus.SUPERSEDED) else "decided_at"
    for field, id_ in (("before", before), ("after", after)):
        if id_ is None:
            continue
        # By any request the user sees, whatever its status now (one decided since still counts).
        found = list(visible.filter(pk=id_).values_list(key, flat=True)[:1])
        if not found:
            detail = f"Approval request {id_} does not exist."
            return Status(400, {"detail": detail, "errors": {field: detail}})
        if found[0] is None:  # its decision was undone (or it had none): no place among decisions
            detail = f"Approval request {id_} is not decided now; page from the request listed before it."
            return Status(400, {"detail": detail, "errors": {field: detail}})
        rows = _beyond(rows, key=key, before=field == "before", at=found[0], id_=id_)
    order = (key, "id") if status == ApprovalStatus.PENDING else (f"-{key}", "-id")
    rows = rows.select_related("decided_by", "claimed_by").prefetch_related(SIGNOFFS)
    page = rows.order_by(*order)[: max(1, min(limit, PAGE))]
    return [ApprovalOut.from_request(r) for r in page]


def _beyond(
    rows: QuerySet[ApprovalRequest], *, key: str, before: bool, at: datetime, id_: int
) -> QuerySet[ApprovalRequest]:
    """The rows before (or after) request `id_`, whose `key` time is `at`: by that time, then by id."""
    op = "lt" if before else "gt"
    return rows.filter(Q(**{f"{key}__{op}": at}) | Q(**{key: at, f"pk__{op}": id_}))


@router.post(
    "/approvals/{approval_id}/decision",
    response={200: ApprovalOut, 400: Error, 403: Error, 404: Error, 409: Error},
)
def decide(request: AuthedRequest, approval_id: int, body: DecisionIn) -> Any:
    try:
        item = access_request(user=request.user, request_id=approval_id)
    except ApprovalRequest.DoesNotExist:
        return Status(404, {"detail": f"Approval request {approval_id} does not exist."})
    try:
        valid = check_decision(
            item, user=request.user, decision=body.decision, args=body.args, message=body.message
        )
        if body.approved_args is not None:
            valid = replace(valid, args_seen=args_mark(body.approved_args))
        decided = do_decide(item, reviewer=request.user, valid=valid)
    except NotAllowed as exc:
        return Status(403, {"detail": str(exc)})
    except Conflict as exc:
        return Status(409, {"detail": str(exc)})
    return ApprovalOut.from_request(decided)


@router.post(
    "/approvals/{approval_id}/undo",
    response={200: ApprovalOut, 403: Error, 404: Error, 409: Error},
)
def undo(request: AuthedRequest, approval_id: int) -> Any:
    """Return a decision to pending while its undo window (DECISION_UNDO_S) is open."""
    try:
        item = access_request(user=request.user, request_id=approval_id)
    except ApprovalRequest.DoesNotExist:
        return Status(404, {"detail": f"Approval request {approval_id} does not exist."})
    try:
        do_undo(item.pk, user=request.user)
    except NotAllowed as exc:
        return Status(403, {"detail": str(exc)})
    except Conflict as exc:
        return Status(409, {"detail": str(exc)})
    return ApprovalOut.from_request(access_request(user=request.user, request_id=approval_id))


@router.post(
    "/approvals/{approval_id}/claim",
    response={200: ApprovalOut, 400: Error, 403: Error, 404: Error, 409: Error},
)
def claim(request: AuthedRequest, approval_id: int, body: ClaimIn) -> Any:
    """Claim a request, release it, or (admins) reassign it to another reviewer."""
    try:
        item = access_request(user=request.user, request_id=approval_id)
    except ApprovalRequest.DoesNotExist:
        return Status(404, {"detail": f"Approval request {approval_id} does not exist."})
    try:
        do_claim_op(item, user=request.user, op=body.op, to=body.to or "")
    except NotAllowed as exc:
        return Status(403, {"detail": str(exc)})
    except Conflict as exc:
        return Status(409, {"detail": str(exc)})
    return ApprovalOut.from_request(access_request(user=request.user, request_id=approval_id))
