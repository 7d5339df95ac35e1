"""Notifiers: told about new pending requests and escalations, from a Celery task that retries.

Pluggable like Django's email backends: settings.GATEHOUSE_NOTIFIERS lists dotted paths of
BaseNotifier subclasses. Shipped: `approvals.notifiers.email.EmailNotifier` (Django's email
framework) and `approvals.notifiers.webhook.WebhookNotifier` (JSON POST signed with HMAC-SHA256).
"""

from dataclasses import asdict, dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

PENDING = "approval.pending"
ESCALATED = "approval.escalated"


@dataclass(frozen=True)
class Notification:
    """What every notifier receives."""

    event: str
    """"approval.pending" or "approval.escalated"."""
    delivery_id: str
    """The same on every retry of one notification, so receivers can drop duplicates."""
    approval: dict[str, Any]
    """id, thread_id, queue, escalated_from, action, args, description, url, created_at, expires_at."""
    sent_at: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class BaseNotifier:
    """Subclasses send one notification and raise on failure (the task retries with backoff)."""

    def send(self, notification: Notification) -> None:
        raise NotImplementedError("subclasses of BaseNotifier must provide send()")

    def configuration_problems(self) -> list[str]:
        """Why this notifier cannot send with the current settings ([] when it can):
        `manage.py check` reports them (approvals.E003)."""
        return []


def get_notifier(path: str) -> BaseNotifier:
    try:
        notifier_class = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"GATEHOUSE_NOTIFIERS: cannot import {path!r} ({exc})") from exc
    if not (isinstance(notifier_class, type) and issubclass(notifier_class, BaseNotifier)):
        raise ImproperlyConfigured(f"GATEHOUSE_NOTIFIERS: {path} is not an approvals.notifiers.BaseNotifier")
    return notifier_class()
