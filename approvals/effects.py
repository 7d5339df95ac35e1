"""Side effects already done, read from the recorded results of gated tools that ran.

A gated call's effect is done when its request was approved (or edited) and the runtime recorded
the tool's result under the gate's key at that checkpoint (`run_once(gate.key, …)`: the pending
write `result:<key>`). Nothing here knows any tool: what an effect says comes from the tool's
own approval description, filled with the arguments it ran with.
"""

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import OuterRef, QuerySet, Value
from django.db.models.functions import Concat

from agents.runtime import RESULT_PREFIX
from approvals.access import Access
from approvals.models import RAN, ApprovalRequest
from approvals.presentation import gate_approval
from checkpoints.selectors import write_time

RECENT = 1000  # effects looked at per question: recent ones are the ones that invite a repeat


@dataclass(frozen=True)
class Effect:
    """A gated tool that ran: which request allowed it, with what arguments, when."""

    request: ApprovalRequest
    args: dict[str, Any]
    ran_at: datetime
    summary: str
    """The tool's description for the arguments it ran with (markdown), or `action(args)`."""

    @property
    def thread_id(self) -> str:
        return self.request.thread_id


def ran_requests() -> QuerySet[ApprovalRequest]:
    """The requests whose gated tool ran (each with its `ran_at`), newest first."""
    ran_at = write_time(
        checkpoint_id=OuterRef("checkpoint_id"), task_id=Concat(Value(RESULT_PREFIX), OuterRef("key"))
    )
    return (
        ApprovalRequest.objects.filter(status__in=RAN)
        .annotate(ran_at=ran_at)
        .filter(ran_at__isnull=False)
        .select_related("decided_by", "checkpoint")
        .order_by("-ran_at")
    )


def _effect(request_: Any) -> Effect:
    args = request_.effective_args
    return Effect(
        request=request_,
        args=args,
        ran_at=request_.ran_at,
        summary=describe(request_.agent, request_.action, args),
    )


def describe(agent: str, action: str, args: dict[str, Any]) -> str:
    approval = gate_approval(agent=agent, action=action)
    described = approval.describe(args) if approval else ""
    return described or f"`{action}({', '.join(f'{k}={v!r}' for k, v in args.items())})`"


def thread_effects(thread_id: str) -> list[Effect]:
    """Every gated tool that ran on the thread, on any branch, newest first."""
    return [_effect(r) for r in ran_requests().filter(thread_id=thread_id)[:RECENT]]


def _key(action: str, args: Any) -> str:
    return action + json.dumps(args, sort_keys=True, default=str)


def same_effects(
    user: AbstractBaseUser | AnonymousUser, *, action: str, args: dict[str, Any], exclude: int | None = None
) -> list[Effect]:
    """Effects of the same tool with the same arguments, in any thread the user's queues show."""
    rows = Access.of(user).visible_requests(ran_requests().filter(action=action))
    if exclude is not None:
        rows = rows.exclude(pk=exclude)
    wanted = _key(action, args)
    return [_effect(r) for r in rows[:RECENT] if _key(r.action, r.effective_args) == wanted]


def flag_done(user: AbstractBaseUser | AnonymousUser, items: list[ApprovalRequest]) -> None:
    """Set `done_before` on each pending item whose exact call already ran somewhere (else None)."""
    actions = {i.action for i in items}
    ran = Access.of(user).visible_requests(ran_requests().filter(action__in=actions)) if actions else None
    _flag(items, ran)


def flag_done_outside(items: list[ApprovalRequest], *, closed: set[str]) -> None:
    """flag_done for a viewer who may see every queue but `closed` (pushes share it by closed set)."""
    actions = {i.action for i in items}
    _flag(items, ran_requests().filter(action__in=actions).exclude(queue__in=closed) if actions else None)


def _flag(items: list[ApprovalRequest], ran: QuerySet[ApprovalRequest] | None) -> None:
    done: dict[str, Effect] = {}
    for r in ran[:RECENT] if ran is not None else []:
        done.setdefault(_key(r.action, r.effective_args), _effect(r))
    for item in items:
        item.done_before = done.get(_key(item.action, item.args))  # type: ignore[attr-defined]
