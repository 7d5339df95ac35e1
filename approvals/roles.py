"""Roles are Django groups: reviewer (decides on approvals), operator (runs agents), admin (everything).

Superusers have every role, and the admin group implies operator and reviewer.
"""

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, Group

REVIEWER = "reviewer"
OPERATOR = "operator"
ADMIN = "admin"
ROLE_NAMES = (REVIEWER, OPERATOR, ADMIN)


def ensure_roles() -> None:
    for name in ROLE_NAMES:
        Group.objects.get_or_create(name=name)


def has_role(user: AbstractBaseUser | AnonymousUser, role: str) -> bool:
    if role not in ROLE_NAMES:
        raise ValueError(f"unknown role {role!r}; expected one of {ROLE_NAMES}")
    if not user.is_authenticated or not user.is_active:
        return False
    if getattr(user, "is_superuser", False):
        return True
    groups = getattr(user, "groups", None)  # a custom user model might not have groups
    return groups is not None and groups.filter(name__in={role, ADMIN}).exists()


def is_reviewer(user: AbstractBaseUser | AnonymousUser) -> bool:
    return has_role(user, REVIEWER)


def is_operator(user: AbstractBaseUser | AnonymousUser) -> bool:
    return has_role(user, OPERATOR)


def is_admin(user: AbstractBaseUser | AnonymousUser) -> bool:
    return has_role(user, ADMIN)
