"""`manage.py seed_demo`: the demo users reviewer, operator and admin, one per role.

Passwords come from DEMO_PASSWORD (the same for all three) or are generated once and kept in
VAR_DIR/demo_passwords.json, so every `make run` prints the same credentials. A demo user that
exists is left as an admin left it (its password, whether it is active, its groups): a restart
never brings back a password someone changed or an account someone deactivated. DEMO_PASSWORD
is a deliberate choice, so it does set the password of a user that exists; the password hash it
set is kept in VAR_DIR/demo_password_set.json (never the password itself), so a later run
without it says the password is still the one DEMO_PASSWORD chose, not that someone changed it.
"""

import json
import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

from approvals.roles import ROLE_NAMES, ensure_roles


def demo_passwords() -> dict[str, str]:
    if shared := os.environ.get("DEMO_PASSWORD"):
        return dict.fromkeys(ROLE_NAMES, shared)
    path = Path(settings.VAR_DIR) / "demo_passwords.json"
    stored: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
    passwords = {name: stored.get(name) or secrets.token_urlsafe(12) for name in ROLE_NAMES}
    if passwords != stored:
        path.write_text(json.dumps(passwords, indent=2) + "\n")
        path.chmod(0o600)
    return passwords


def _set_by_demo_password_path() -> Path:
    return Path(settings.VAR_DIR) / "demo_password_set.json"


def set_by_demo_password() -> dict[str, str]:
    """Per demo user, the password hash DEMO_PASSWORD last set (the hash, not the password: a
    chosen password is not written to disk)."""
    path = _set_by_demo_password_path()
    try:
        stored = json.loads(path.read_text()) if path.exists() else {}
    except ValueError:  # damaged: it only costs the note (the password shows as changed since)
        return {}
    if not isinstance(stored, dict):
        return {}
    return {name: value for name, value in stored.items() if isinstance(value, str)}


def remember_set_by_demo_password(hashes: dict[str, str]) -> None:
    path = _set_by_demo_password_path()
    path.write_text(json.dumps(hashes, indent=2) + "\n")
    path.chmod(0o600)


class Command(BaseCommand):
    help = "Create the demo users reviewer, operator and admin (idempotent) and print their passwords."

    def handle(self, *args: Any, **options: Any) -> None:
        passwords, chosen = demo_passwords(), bool(os.environ.get("DEMO_PASSWORD"))
        User = get_user_model()
        shown: dict[str, str] = {}
        known = set_by_demo_password()
        marks = dict(known)
        with transaction.atomic():
            ensure_roles()
            for role in ROLE_NAMES:
                user, created = User.objects.get_or_create(username=role)
                if created:
                    user.is_staff = user.is_superuser = role == "admin"  # admin can use Django admin
                    user.groups.set([Group.objects.get(name=role)])
                if created or chosen:
                    user.set_password(passwords[role])
                    user.save()
                if chosen:
                    marks[role] = user.password
                elif created:
                    marks.pop(role, None)  # a new user with the generated password
                shown[role] = shown_password(
                    user, passwords[role], checked=created or chosen, set_by_demo_password=marks.get(role)
                )
        if marks != known:
            remember_set_by_demo_password(marks)

        width = max(len(p) for p in shown.values())
        self.stdout.write(f"{'username':<10} {'password':<{width}} role")
        for role in ROLE_NAMES:
            self.stdout.write(f"{role:<10} {shown[role]:<{width}} {role}")


def shown_password(
    user: Any, password: str, *, checked: bool, set_by_demo_password: str | None = None
) -> str:
    """The password to print, or why there is none that works. set_by_demo_password: the hash
    an earlier run's DEMO_PASSWORD set, if one did."""
    if not user.is_active:
        return "(deactivated)"
    if checked or user.check_password(password):
        return password
    if set_by_demo_password and user.password == set_by_demo_password:
        return "(set by DEMO_PASSWORD)"
    return "(changed since; set DEMO_PASSWORD to reset it)"
