"""Roles are Django groups: reviewer (decides on approvals), operator (runs agents), admin (everything).

Superusers have every role, and the admin group implies operator and reviewer (approvals.access).
"""

from django.contrib.auth.models import Group

REVIEWER = "reviewer"
OPERATOR = "operator"
ADMIN = "admin"
ROLE_NAMES = (REVIEWER, OPERATOR, ADMIN)


def ensure_roles() -> None:
    for name in ROLE_NAMES:
        Group.objects.get_or_create(name=name)
