"""The admin role in Django admin: Gatehouse's roles are groups with no Django permissions, so
Django's own model-permission checks would leave a member of the admin group who is not a
superuser only the pages that ask the role themselves (policies). This backend holds every
model permission for the admin role, as Django holds them for a superuser: the role "does
everything" (README, "Security model"), queues, tokens, users and groups included."""

from typing import Any

from django.contrib.auth.backends import BaseBackend

from approvals.access import Access


class AdminRoleBackend(BaseBackend):
    """Permissions only: it authenticates nobody (ModelBackend checks passwords)."""

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        return bool(user_obj.is_active and Access.of(user_obj).is_admin)

    def has_module_perms(self, user_obj: Any, app_label: str) -> bool:
        return bool(user_obj.is_active and Access.of(user_obj).is_admin)
