"""Policies at the gate: the first matching policy approves, denies, routes or requires N
approvers for each request just opened. Runs inside the step's transaction."""

import logging
from collections.abc import Callable
from typing import Any

from django.db import connection

from approvals.actions.audit import audit_request
from approvals.actions.decisions import do_decide_by_policy
from approvals.effects import thread_effects
from approvals.models import ApprovalRequest, Policy, PolicyAction
from approvals.policies import Rule, effects_summary, first_match, gate_variables, rules_for
from checkpoints.backends import get_backend
from checkpoints.backends.orm import prepared

log = logging.getLogger(__name__)
POLICIES = Policy._meta.db_table


def do_apply_policies(requests: list[ApprovalRequest], *, thread_id: str, agent: str) -> bool:
    """Apply the first matching policy to each pending request; return True if any was decided
    (the caller then resumes the thread once nothing at the checkpoint is left open)."""
    decided = False
    metadata: dict[str, Any] | None = None
    for request_ in requests:
        rules = rules_for(agent=agent, tool=request_.action, thread_id=thread_id)
        if not rules:
            continue
        if metadata is None and _reads_thread(rules):
            metadata = get_backend().get_thread(thread_id=thread_id).metadata or {}
        rule = _first_in_force(rules, variables=_variables(request_, agent=agent, metadata=metadata or {}))
        if rule is None:
            continue
        decided |= _apply(request_, rule=rule)
    return decided


def _first_in_force(rules: list[Rule], *, variables: Callable[[bool], dict[str, Any]]) -> Rule | None:
    """The first matching rule whose policy still exists, held to the caller's commit. The rules
    may be older than a revoke or delete (read before it committed, or cached until its version
    bump arrives): a deleted one is skipped, as if read after its deletion, and the next tried."""
    while (rule := first_match(rules, variables=variables)) is not None:
        if _hold_policy(policy_id=rule.id):
            return rule
        rules = [r for r in rules if r.id != rule.id]
    return None


def _hold_policy(*, policy_id: int) -> bool:
    """Whether the policy exists; on Postgres its row is then held FOR KEY SHARE to the commit.

    The request's foreign key to it is checked only at the commit (deferred), too late: a
    delete committed meanwhile made that commit an IntegrityError, and the step was retried.
    Held, a revoke or delete (which locks the row FOR UPDATE first) waits for the gate's
    commit, then clears the request's link (SET_NULL; the decision keeps the rule's name and
    version). Deletes lock the policy before the ledger, as the gate does, so no deadlock.
    SQLite has no row locks: the step's transaction already holds its write lock."""
    lock = " FOR KEY SHARE" if connection.features.has_select_for_update else ""
    return prepared.fetch_one(f"SELECT 1 FROM {POLICIES} WHERE id = %s{lock}", [policy_id]) is not None


def _reads_thread(rules: list[Rule]) -> bool:
    """Whether a condition reads the thread's metadata or tenant (a query; thread.id is known)."""
    return any("thread" in r.when.replace("thread.id", "") for r in rules)


def _variables(request_: ApprovalRequest, *, agent: str, metadata: dict[str, Any]) -> Any:
    def build(with_effects: bool) -> dict[str, Any]:
        done = (
            [e.args for e in thread_effects(request_.thread_id) if e.request.action == request_.action]
            if with_effects
            else []
        )
        return gate_variables(
            args=request_.args,
            agent=agent,
            tool=request_.action,
            thread_id=request_.thread_id,
            metadata=metadata,
            effects=effects_summary(done, current=request_.args),
        )

    return build


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
