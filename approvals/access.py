"""Who may see and do what: one `Access` per user answers every question views, the API,
consumers, selectors and actions ask.

Roles are Django groups (approvals.roles): reviewer decides, operator runs agents, admin does
everything; superusers and the admin group hold every role. Queues narrow them: a queue is open
to everyone with a role unless its `Queue` row lists groups; then only members of one of those
groups see it, and only reviewers among them decide. Operators and admins see every thread;
reviewers see the threads their queues cover.

`Access.of(user)` computes the user's roles (one query) and closed queues (one query) once and
keeps them on the user object, which lives for one request or one socket. Actions check on the
row they locked, so a request escalated to another queue mid-decision is refused.
"""

from collections import defaultdict
from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import TypeVar

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from approvals import rows
from approvals.actions.errors import NotAllowed
from approvals.models import ApprovalRequest
from approvals.roles import ADMIN, OPERATOR, REVIEWER, ROLE_NAMES
from checkpoints import selectors as checkpoint_selectors
from checkpoints.models import Thread

User = AbstractBaseUser | AnonymousUser
U = TypeVar("U", bound=AbstractBaseUser)
Restrictions = Mapping[str, frozenset[str]]  # queue name → the groups it is limited to


def queue_restrictions() -> Restrictions:
    """Every queue limited to groups, with those groups' names (one query)."""
    groups: defaultdict[str, set[str]] = defaultdict(set)
    for queue, group in rows.queue_groups():
        groups[queue].add(group)
    return {queue: frozenset(names) for queue, names in groups.items()}


class Access:
    def __init__(self, user: User, *, restrictions: Restrictions | None = None) -> None:
        self.user = user
        if restrictions is not None:
            self.__dict__["restrictions"] = restrictions

    @classmethod
    def of(cls, user: User, *, fresh: bool = False) -> "Access":
        """The user's access, computed once per user object (a request's or a socket's)."""
        cached = getattr(user, "_gatehouse_access", None)
        if cached is None or fresh:
            cached = cls(user)
            user._gatehouse_access = cached  # type: ignore[union-attr]
        return cached

    @cached_property
    def groups(self) -> frozenset[str]:
        if not self.user.is_authenticated or not self.user.is_active:
            return frozenset()
        groups = getattr(self.user, "groups", None)  # a custom user model might not have groups
        if groups is None:
            return frozenset()
        if "groups" in getattr(self.user, "_prefetched_objects_cache", {}):  # prefetch_related
            return frozenset(g.name for g in groups.all())
        return rows.group_names(self.user.pk)

    @cached_property
    def roles(self) -> frozenset[str]:
        if not self.user.is_authenticated or not self.user.is_active:
            return frozenset()
        if getattr(self.user, "is_superuser", False) or ADMIN in self.groups:
            return frozenset(ROLE_NAMES)
        return frozenset(self.groups & set(ROLE_NAMES))

    @cached_property
    def restrictions(self) -> Restrictions:
        return queue_restrictions()

    # Roles
    @property
    def has_any_role(self) -> bool:
        return bool(self.roles)

    @property
    def is_admin(self) -> bool:
        return ADMIN in self.roles

    @property
    def is_reviewer(self) -> bool:
        return REVIEWER in self.roles

    @property
    def can_operate(self) -> bool:
        """Start, steer, edit and fork threads; see every thread."""
        return OPERATOR in self.roles

    can_manage_claims = is_admin  # reassign or release other reviewers' claims
    can_manage_policies = is_admin
    can_read_ledger = is_admin
    can_see_threads = has_any_role

    @property
    def can_revoke_standing(self) -> bool:
        """Revoke a thread's standing decision (it only makes the thread stricter)."""
        return self.is_admin or self.is_reviewer

    # Queues
    @cached_property
    def closed_queues(self) -> frozenset[str]:
        """Names of the queues the user may not see (none for admins)."""
        if self.is_admin:
            return frozenset()
        return frozenset(q for q, groups in self.restrictions.items() if not groups & self.groups)

    def can_see_queue(self, queue: str) -> bool:
        return self.has_any_role and queue not in self.closed_queues

    def can_decide(self, queue: str) -> bool:
        return self.is_reviewer and self.can_see_queue(queue)

    def visible_queues(self, known: Iterable[str]) -> list[str]:
        return [q for q in known if q not in self.closed_queues] if self.has_any_role else []

    def visible_requests(self, requests: QuerySet[ApprovalRequest]) -> QuerySet[ApprovalRequest]:
        """Narrow requests to the queues the user may see."""
        if not self.has_any_role:
            return requests.none()
        return requests.exclude(queue__in=self.closed_queues) if self.closed_queues else requests

    # Threads
    def can_see_thread(self, thread_id: str) -> bool:
        if self.can_operate:
            return True
        queues = ApprovalRequest.objects.filter(thread_id=thread_id).values_list("queue", flat=True)
        return any(self.can_see_queue(q) for q in set(queues))

    def visible_threads(self) -> QuerySet[Thread]:
        """Threads the user may list."""
        if self.can_operate:
            return checkpoint_selectors.all_threads()
        if not self.has_any_role:
            return checkpoint_selectors.all_threads().none()
        requests = ApprovalRequest.objects.exclude(queue__in=self.closed_queues)
        return checkpoint_selectors.threads_in(requests.values("thread_id"))

    def require_operator(self, verb: str) -> None:
        if not self.can_operate:
            raise NotAllowed(f"Only operators and admins may {verb} threads.")


def reviewers_who_may_decide(users: Iterable[U], queue: str) -> list[U]:
    """The users who may decide the queue (prefetch their groups: then no query per user)."""
    restrictions = queue_restrictions()
    return [u for u in users if Access(u, restrictions=restrictions).can_decide(queue)]
