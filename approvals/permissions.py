"""Who may see and do what. Roles are Django groups (approvals.roles); queues narrow them.

Queue access: every queue is open to everyone with a role unless its `Queue` row lists groups;
then only members of one of those groups see it (and only reviewers among them decide).
Admins see and decide every queue, reassign claims and read the ledger.
"""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from approvals import roles
from approvals.models import ApprovalRequest, Queue

User = AbstractBaseUser | AnonymousUser


def has_any_role(user: User) -> bool:
    return bool(user.is_authenticated) and any(roles.has_role(user, r) for r in roles.ROLE_NAMES)


def _restricted(user: User) -> QuerySet[Queue]:
    """Queues limited to groups the user is in none of."""
    groups = getattr(user, "groups", None)
    restricted = Queue.objects.filter(groups__isnull=False)
    return restricted.exclude(groups__in=groups.all()) if groups is not None else restricted


def closed_queues(user: User) -> set[str]:
    """Names of the queues the user may not see (none for admins)."""
    if roles.is_admin(user):
        return set()
    return set(_restricted(user).values_list("name", flat=True).distinct())


def can_see_queue(user: User, queue: str) -> bool:
    if not has_any_role(user):
        return False
    return roles.is_admin(user) or not _restricted(user).filter(name=queue).exists()


def can_decide(user: User, queue: str) -> bool:
    return roles.has_role(user, roles.REVIEWER) and can_see_queue(user, queue)


def visible_requests(user: User, requests: QuerySet[ApprovalRequest]) -> QuerySet[ApprovalRequest]:
    """Narrow requests to the queues the user may see."""
    if not has_any_role(user):
        return requests.none()
    closed = closed_queues(user)
    return requests.exclude(queue__in=closed) if closed else requests


def can_manage_claims(user: User) -> bool:
    """Reassign or release other reviewers' claims."""
    return roles.is_admin(user)


def can_manage_policies(user: User) -> bool:
    return roles.is_admin(user)


def can_revoke_standing(user: User) -> bool:
    """Revoke a thread's standing decision (it only makes the thread stricter)."""
    return roles.is_admin(user) or roles.is_reviewer(user)


def can_read_ledger(user: User) -> bool:
    return roles.is_admin(user)


def can_start_threads(user: User) -> bool:
    return bool(user.is_authenticated) and roles.has_role(user, roles.OPERATOR)


def can_see_threads(user: User) -> bool:
    return has_any_role(user)
