"""Policy endpoints (admins only): list, create, read, change, delete."""

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Router, Schema, Status
from pydantic import AfterValidator, ConfigDict, Field

from agents.actions import InvalidInput
from approvals.access import Access
from approvals.actions.policies import do_create_policy, do_delete_policy, do_update_policy
from approvals.api.base import Error
from approvals.http import AuthedRequest
from approvals.models import Policy
from approvals.policy_preview import DEFAULT_LIMIT, MAX_LIMIT, candidate, preview_policy
from approvals.policy_targets import target_errors

router = Router(tags=["policies"])

Name = Annotated[str, Field(min_length=1, max_length=100)]
ActionName = Literal["approve", "deny", "route", "require"]
When = Annotated[str, Field(min_length=1, max_length=2000)]
Order = Annotated[int, Field(ge=-1_000_000, le=1_000_000)]
Approvers = Annotated[int, Field(ge=1, le=10)]
# Each group once, sorted: a name given twice is one group (so the preview sees what a save stores).
Groups = Annotated[
    list[Annotated[str, Field(max_length=150)]],
    Field(max_length=50),
    AfterValidator(lambda v: sorted(set(v))),
]


class PolicyIn(Schema):
    model_config = ConfigDict(extra="forbid")

    name: Name
    agent: Annotated[str, Field(max_length=100)] = ""
    tool: Name
    when: When = "true"
    action: ActionName
    queue: Annotated[str, Field(max_length=64)] = ""
    approvers: Approvers = 2
    groups: Groups = []
    message: Annotated[str, Field(max_length=500)] = ""
    order: Order = 100
    enabled: bool = True


class PolicyPatch(Schema):
    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    agent: Annotated[str, Field(max_length=100)] | None = None
    tool: Name | None = None
    when: When | None = None
    action: ActionName | None = None
    queue: Annotated[str, Field(max_length=64)] | None = None
    approvers: Approvers | None = None
    groups: Groups | None = None
    message: Annotated[str, Field(max_length=500)] | None = None
    order: Order | None = None
    enabled: bool | None = None


class PreviewIn(PolicyPatch):
    """A new policy's fields (`tool` and `action` required), or an existing `id` plus changes."""

    id: int | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT


class PreviewRowOut(Schema):
    request_id: int
    thread_id: str
    created_at: datetime
    args: dict[str, Any]
    happened: str
    result: str
    would: str
    by_candidate: bool


class PreviewOut(Schema):
    considered: int
    changed: list[PreviewRowOut]
    counts: dict[str, int]


class PolicyOut(Schema):
    id: int
    name: str
    agent: str
    tool: str
    when: str
    action: str
    queue: str
    approvers: int
    groups: list[str]
    message: str
    order: int
    enabled: bool
    version: int
    updated_at: datetime

    @staticmethod
    def of(p: Policy) -> "PolicyOut":
        return PolicyOut(
            id=p.pk,
            name=p.name,
            agent=p.agent,
            tool=p.tool,
            when=p.when,
            action=p.action,
            queue=p.queue,
            approvers=p.approvers,
            groups=sorted(g.name for g in p.groups.all()),
            message=p.message,
            order=p.order,
            enabled=p.enabled,
            version=p.version,
            updated_at=p.updated_at,
        )


ADMINS_ONLY = "Only admins manage policies."


def _not_found(policy_id: int) -> tuple[int, dict[str, str]]:
    return 404, {"detail": f"Policy {policy_id} does not exist."}


def check_target(*, agent: str, tool: str, was: tuple[str, str] | None = None) -> None:
    """InvalidInput (a 400 naming the gated tools) for a policy that could never apply."""
    if errors := target_errors(agent=agent, tool=tool, was=was):
        raise InvalidInput(errors)


def _target(policy_id: int, changes: dict[str, Any]) -> dict[str, Any]:
    """check_target's arguments for `changes` to a saved policy (Policy.DoesNotExist if none)."""
    stored = Policy.objects.only("agent", "tool").get(pk=policy_id)
    return {
        "agent": changes.get("agent", stored.agent),
        "tool": changes.get("tool", stored.tool),
        "was": (stored.agent, stored.tool),
    }


@router.get("/policies", response={200: list[PolicyOut], 403: Error})
def list_policies(request: AuthedRequest) -> Any:
    if not Access.of(request.user).can_manage_policies:
        return Status(403, {"detail": ADMINS_ONLY})
    rows = Policy.objects.filter(thread_id="").prefetch_related("groups").order_by("tool", "order", "id")
    return [PolicyOut.of(p) for p in rows[:1000]]


@router.post("/policies", response={201: PolicyOut, 400: Error, 403: Error})
def create_policy(request: AuthedRequest, body: PolicyIn) -> Any:
    if not Access.of(request.user).can_manage_policies:
        return Status(403, {"detail": ADMINS_ONLY})
    fields = body.model_dump(exclude={"groups"})
    check_target(agent=body.agent, tool=body.tool)
    policy = do_create_policy(actor=request.user, fields=fields, groups=body.groups)
    return Status(201, PolicyOut.of(policy))


@router.post("/policies/preview", response={200: PreviewOut, 400: Error, 403: Error, 404: Error})
def preview(request: AuthedRequest, body: PreviewIn) -> Any:
    """What the policy set with this policy in place would decide differently; nothing is saved."""
    if not Access.of(request.user).can_manage_policies:
        return Status(403, {"detail": ADMINS_ONLY})
    changes = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None}
    policy_id, limit, groups = (
        changes.pop("id", None),
        changes.pop("limit", DEFAULT_LIMIT),
        changes.pop("groups", None),
    )
    if policy_id is None and not {"tool", "action"} <= changes.keys():
        return Status(400, {"detail": "A new policy needs `tool` and `action` (or give the `id` of one)."})
    try:
        rule = candidate(policy_id=policy_id, fields=changes, groups=groups)
    except Policy.DoesNotExist:
        return Status(*_not_found(policy_id or 0))
    result = preview_policy(rule, limit=limit)
    return PreviewOut(
        considered=result.considered,
        changed=[PreviewRowOut(**vars(row)) for row in result.changed],
        counts=result.counts,
    )


@router.get("/policies/{policy_id}", response={200: PolicyOut, 403: Error, 404: Error})
def get_policy(request: AuthedRequest, policy_id: int) -> Any:
    if not Access.of(request.user).can_manage_policies:
        return Status(403, {"detail": ADMINS_ONLY})
    policy = Policy.objects.filter(pk=policy_id).first()
    return PolicyOut.of(policy) if policy else Status(*_not_found(policy_id))


@router.patch("/policies/{policy_id}", response={200: PolicyOut, 400: Error, 403: Error, 404: Error})
def change_policy(request: AuthedRequest, policy_id: int, body: PolicyPatch) -> Any:
    if not Access.of(request.user).can_manage_policies:
        return Status(403, {"detail": ADMINS_ONLY})
    changes = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None}
    groups = changes.pop("groups", None)
    try:
        check_target(**_target(policy_id, changes))
        return PolicyOut.of(do_update_policy(policy_id, actor=request.user, fields=changes, groups=groups))
    except Policy.DoesNotExist:
        return Status(*_not_found(policy_id))


@router.delete("/policies/{policy_id}", response={204: None, 403: Error, 404: Error})
def delete_policy(request: AuthedRequest, policy_id: int) -> Any:
    if not Access.of(request.user).can_manage_policies:
        return Status(403, {"detail": ADMINS_ONLY})
    try:
        do_delete_policy(policy_id, actor=request.user)
    except Policy.DoesNotExist:
        return Status(*_not_found(policy_id))
    return Status(204, None)
