"""Who may read and steer threads: operators and admins all; reviewers only threads their queues cover."""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models

from approvals import permissions, roles
from approvals.models import ApprovalRequest
from checkpoints.models import Thread

User = AbstractBaseUser | AnonymousUser


def can_operate(user: User) -> bool:
    return bool(user.is_authenticated) and roles.has_role(user, roles.OPERATOR)


def can_see_thread(user: User, thread: Thread) -> bool:
    if can_operate(user):
        return True
    queues = ApprovalRequest.objects.filter(thread=thread).values_list("queue", flat=True).distinct()
    return any(permissions.can_see_queue(user, queue) for queue in queues)


def visible_threads(user: User) -> "models.QuerySet[Thread]":
    """Threads the user may list."""
    if can_operate(user):
        return Thread.objects.all()
    from approvals.selectors import visible_queues

    return Thread.objects.filter(approval_requests__queue__in=visible_queues(user)).distinct()
