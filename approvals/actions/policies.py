"""Create, change and delete policies: validated (the CEL condition compiles), versioned, and
every change in the ledger with its diff."""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group
from django.core.exceptions import ValidationError
from django.db import transaction

from agents.actions import InvalidInput
from approvals.actions.audit import appended_last, do_audit
from approvals.models import Policy

EDITABLE = (
    *("name", "agent", "tool", "when", "action", "queue", "approvers"),
    *("message", "order", "enabled", "thread_id", "until"),
)
Actor = AbstractBaseUser | AnonymousUser | None


def policy_facts(policy: Policy) -> dict[str, Any]:
    """A policy's fields as the ledger records them (groups by name)."""
    facts: dict[str, Any] = {f: getattr(policy, f) for f in EDITABLE}
    facts["until"] = policy.until.isoformat() if policy.until else None
    facts["groups"] = sorted(g.name for g in policy.groups.all()) if policy.pk else []
    return facts


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    """{field: [old, new]} for each field that changed."""
    return {
        k: [before.get(k), after.get(k)]
        for k in sorted(set(before) | set(after))
        if before.get(k) != after.get(k)
    }


def groups_named(names: list[str]) -> list[Group]:
    """The groups with these names, each once, by name; InvalidInput naming any that do not exist."""
    names = sorted(set(names))  # a name given twice is one group: repeating it changes nothing
    found = {g.name: g for g in Group.objects.filter(name__in=names)}
    missing = [n for n in names if n not in found]
    if missing:
        raise InvalidInput({"groups": f"no such group: {', '.join(missing)}"})
    return [found[n] for n in names]


def check_policy(policy: Policy) -> None:
    """Raise InvalidInput (by field, with the CEL error) unless the policy can be saved."""
    try:
        policy.full_clean(exclude=["created_by"])
    except ValidationError as exc:
        raise InvalidInput({k: " ".join(v) for k, v in exc.message_dict.items()}) from exc


def do_record_policy_change(
    policy: Policy, *, actor: Actor, kind: str, before: dict[str, Any] | None, after: dict[str, Any] | None
) -> None:
    """Append policy.create / policy.update / policy.delete with the diff to the ledger."""
    do_audit(
        actor=actor,
        action=f"policy.{kind}",
        thread_id=(after or before or {}).get("thread_id", ""),
        data={
            "policy": {"id": policy.pk, "name": policy.name, "version": policy.version},
            "diff": diff(before or {}, after or {}),
        },
    )


def do_create_policy(*, actor: Actor, fields: dict[str, Any], groups: list[str] | None = None) -> Policy:
    """Validate and save a new policy (version 1); audit it."""
    policy = Policy(**{k: v for k, v in fields.items() if k in EDITABLE})
    if actor is not None and actor.is_authenticated:
        policy.created_by = actor  # type: ignore[assignment]
    check_policy(policy)
    group_rows = groups_named(groups or [])
    with transaction.atomic():
        policy.save()
        policy.groups.set(group_rows)
        do_record_policy_change(policy, actor=actor, kind="create", before=None, after=policy_facts(policy))
    return policy


def do_update_policy(
    policy_id: int, *, actor: Actor, fields: dict[str, Any], groups: list[str] | None = None
) -> Policy:
    """Apply the changed fields; a real change bumps the version and is audited with its diff."""
    with transaction.atomic():
        policy = Policy.objects.select_for_update().get(pk=policy_id)
        before = policy_facts(policy)
        for key, value in fields.items():
            if key in EDITABLE:
                setattr(policy, key, value)
        check_policy(policy)
        group_rows = groups_named(groups) if groups is not None else None
        after = {
            **policy_facts(policy),
            **({"groups": [g.name for g in group_rows]} if group_rows is not None else {}),
        }
        if after == before:
            return policy
        policy.version += 1
        policy.save()
        if group_rows is not None:
            policy.groups.set(group_rows)
        do_record_policy_change(policy, actor=actor, kind="update", before=before, after=after)
    return policy


def do_delete_policy(policy_id: int, *, actor: Actor) -> None:
    """Delete the policy; the ledger keeps what it was."""
    with transaction.atomic(), appended_last():  # the event, as it was, after the delete
        policy = Policy.objects.select_for_update().get(pk=policy_id)
        before = policy_facts(policy)
        do_record_policy_change(policy, actor=actor, kind="delete", before=before, after=None)
        policy.delete()
