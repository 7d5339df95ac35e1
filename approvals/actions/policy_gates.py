"""Policies at the gate: the first matching policy approves, denies, routes or requires N
approvers for each request just opened; one whose condition cannot be evaluated leaves the
request to a person, saying why. Runs inside the step's transaction."""

import logging
from collections.abc import Callable
from functools import cached_property
from typing import Any

from django.db import connection
from django.utils import timezone

from approvals.actions.audit import audit_request
from approvals.actions.decisions import do_decide_by_policy
from approvals.models import RAN, ApprovalRequest, Policy, PolicyAction
from approvals.policies import Rule, Unevaluated, effects_summary, first_match, gate_variables, rules_for
from checkpoints.backends import get_backend
from checkpoints.backends.base import ThreadData
from checkpoints.backends.orm import prepared

log = logging.getLogger(__name__)
POLICIES = Policy._meta.db_table
UNTIL = Policy._meta.get_field("until")
POLICY_FAILED = "policy.failed"
"""The ledger's event for a gate left to a person because a policy could not be evaluated."""


def do_apply_policies(requests: list[ApprovalRequest], *, thread_id: str, agent: str) -> bool:
    """Apply the first matching policy to each pending request; return True if any was decided
    (the caller then resumes the thread once nothing at the checkpoint is left open)."""
    decided = False
    thread = _Thread(thread_id)
    for request_ in requests:
        rule = _rule_for(request_, agent=agent, thread=thread)
        if isinstance(rule, Unevaluated):
            _leave_to_a_person(request_, failed=rule)
        elif rule is not None:
            decided |= _apply(request_, rule=rule)
    return decided


class _Thread:
    """The gate's thread, read once and only if a rule needs it (a query)."""

    def __init__(self, thread_id: str) -> None:
        self.id = thread_id

    @cached_property
    def data(self) -> ThreadData:
        return get_backend().get_thread(thread_id=self.id)


def _rule_for(request_: ApprovalRequest, *, agent: str, thread: _Thread) -> Rule | Unevaluated | None:
    """The first matching rule in force. If the matched policy changed since the rules were read
    (a change committed after this gate read the policies' generation), read them from the
    database and match again; if it changed again meanwhile, no rule decides: a person does."""
    for fresh in (False, True):
        rules = _rules(request_.action, agent=agent, thread=thread, fresh=fresh)
        if not rules:
            return None
        metadata = (thread.data.metadata or {}) if _reads_thread(rules) else {}
        rule, stale = _first_in_force(rules, variables=_variables(request_, agent=agent, metadata=metadata))
        if not isinstance(rule, Rule) or not stale:
            return rule
        log.info("policy %s changed since this gate read it; reading the policies again", rule.label)
    return None


def _rules(tool: str, *, agent: str, thread: _Thread, fresh: bool) -> list[Rule]:
    rules = rules_for(agent=agent, tool=tool, thread_id=thread.id, fresh=fresh)
    if any(r.thread_id for r in rules):  # a standing decision: only on the thread it was made on
        rules = [r for r in rules if r.made_on(thread_created=thread.data.created_at)]
    return rules


def _first_in_force(
    rules: list[Rule], *, variables: Callable[[bool], dict[str, Any]]
) -> tuple[Rule | Unevaluated | None, bool]:
    """The first matching rule and whether it is stale (then it must not decide); if not, its
    policy is held to the caller's commit. The rules may be older than a change committed after
    the gate read the policies' generation: a deleted policy is skipped, as if read after its
    deletion, and the next tried; an edited, disabled or expired one is stale."""
    while isinstance(rule := first_match(rules, variables=variables), Rule):
        held = _hold_policy(rule)
        if held is None:
            rules = [r for r in rules if r.id != rule.id]
        else:
            return rule, not held
    return rule, False  # None, or a condition that failed: not held, it decides nothing


def _hold_policy(rule: Rule) -> bool | None:
    """Whether the rule's policy is still in force as read (same version, enabled, not expired);
    None if it was deleted. On Postgres its row is then held FOR KEY SHARE to the commit.

    The request's foreign key to it is checked only at the commit (deferred), too late: a
    delete committed meanwhile made that commit an IntegrityError, and the step was retried.
    Held, a change or delete (which locks the row FOR UPDATE first) waits for the gate's
    commit; a delete then clears the request's link (SET_NULL; the decision keeps the rule's
    name and version). Deletes lock the policy before the ledger, as the gate does, so no
    deadlock. SQLite has no row locks: the step's transaction already holds its write lock."""
    lock = " FOR KEY SHARE" if connection.features.has_select_for_update else ""
    now = UNTIL.get_db_prep_value(timezone.now(), connection)
    in_force = "version = %s AND enabled AND (until IS NULL OR until > %s)"  # on the row as locked
    row = prepared.fetch_one(
        f"SELECT {in_force} FROM {POLICIES} WHERE id = %s{lock}", [rule.version, now, rule.id]
    )
    return None if row is None else bool(row[0])


def _reads_thread(rules: list[Rule]) -> bool:
    """Whether a condition reads the thread's metadata or tenant (a query; thread.id is known)."""
    return any("thread" in r.when.replace("thread.id", "") for r in rules)


def _variables(
    request_: ApprovalRequest, *, agent: str, metadata: dict[str, Any], args: dict[str, Any] | None = None
) -> Any:
    """The gate's variables for the request (`args`: another proposal for it, a reviewer's edit)."""
    proposed = request_.args if args is None else args

    def build(with_effects: bool) -> dict[str, Any]:
        done = _done_args(request_) if with_effects else []
        return gate_variables(
            args=proposed,
            agent=agent,
            tool=request_.action,
            thread_id=request_.thread_id,
            metadata=metadata,
            effects=effects_summary(done, current=proposed),
        )

    return build


def _done_args(request_: ApprovalRequest) -> list[dict[str, Any]]:
    """The arguments (as run: a reviewer's edit) of the tool's calls on the thread that ran or
    are approved to run, newest first: every one, not the thread's last effects of any tool
    (a thousand calls of another tool pushed a refund out of `effects.sum`). A call approved
    earlier at this same gate counts: ten refunds asked at once each saw none done, and a
    per-thread limit let all ten through."""
    rows = (
        ApprovalRequest.objects.filter(thread_id=request_.thread_id, action=request_.action, status__in=RAN)
        .exclude(pk=request_.pk)
        .order_by("-decided_at", "-id")
        .values_list("args", "decision_args")
    )
    return [edited if edited is not None else args for args, edited in rows]


def _leave_to_a_person(request_: ApprovalRequest, *, failed: Unevaluated) -> None:
    """Say on the request why no policy decided it; it stays in the queue it was raised in. The
    ledger records which policy (and version) failed and why, in the gate's transaction: an
    auditor asking why a person had to decide finds it there, chained with the rest."""
    request_.status_reason = failed.reason
    request_.save(update_fields=["status_reason"])
    rule = failed.rule
    audit_request(
        request_,
        actor=None,
        action=POLICY_FAILED,
        data={
            "policy": {"id": rule.id, "name": rule.name, "version": rule.version} if rule else None,
            "error": failed.error,
        },
    )


def _apply(request_: ApprovalRequest, *, rule: Rule) -> bool:
    """Carry out the rule on the request; True if it decided it."""
    if rule.action in (PolicyAction.APPROVE, PolicyAction.DENY):
        do_decide_by_policy(request_, rule=rule)
        return True
    request_.policy_id, request_.policy_name, request_.policy_version = rule.id, rule.name, rule.version
    fields = ["policy", "policy_name", "policy_version"]
    if rule.action == PolicyAction.ROUTE:
        request_.queue = rule.queue
        fields.append("queue")
    elif rule.action == PolicyAction.REQUIRE:
        request_.required_approvals, request_.required_groups = rule.approvers, list(rule.groups)
        fields += ["required_approvals", "required_groups"]
    request_.save(update_fields=fields)
    audit_request(
        request_,
        actor=None,
        action=f"policy.{rule.action}",
        data={
            "policy": {"id": rule.id, "name": rule.name, "version": rule.version},
            "required": request_.required_approvals,
            "groups": request_.required_groups,
        },
    )
    return False


def edit_refusal(
    request_: ApprovalRequest, *, args: dict[str, Any], may_decide: Callable[[str], bool]
) -> str:
    """Why the policies refuse a reviewer's edit of the pending request to `args` ("" if they do
    not). The gate tried them on the model's proposal; an edit is a new proposal, and one person
    must not edit a small refund into one a policy denies, routes to a queue they may not decide,
    or leaves to more approvers than the request waits for. A policy that approves, none that
    matches, or one that cannot be evaluated leaves the decision to the reviewer making it.
    Call in the decision's transaction, with the request locked."""
    thread = _Thread(request_.thread_id)
    rules = [
        r for r in _rules(request_.action, agent=request_.agent, thread=thread, fresh=True) if not r.standing
    ]
    if not rules:
        return ""
    metadata = (thread.data.metadata or {}) if _reads_thread(rules) else {}
    rule = first_match(
        rules, variables=_variables(request_, agent=request_.agent, metadata=metadata, args=args)
    )
    if not isinstance(rule, Rule):
        return ""
    if rule.action == PolicyAction.DENY:
        why = f": {rule.message}" if rule.message else ""
        return f"Policy {rule.label} denies these arguments{why}"
    if rule.action == PolicyAction.ROUTE and rule.queue != request_.queue and not may_decide(rule.queue):
        return (
            f"Policy {rule.label} sends these arguments to the {rule.queue!r} queue, which you may not decide"
        )
    waits_for = (request_.required_approvals, set(request_.required_groups))
    if rule.action == PolicyAction.REQUIRE and (
        rule.approvers > waits_for[0] or not set(rule.groups) <= waits_for[1]
    ):
        return (
            f"Policy {rule.label} requires {rule.approvers} approvers for these arguments; "
            f"this request waits for {waits_for[0]}"
        )
    return ""
