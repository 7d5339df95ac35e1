"""Startup checks for the inbox's settings (registered in ApprovalsConfig.ready): a notify backoff
the broker would cut short, a resend delay shorter than a retry's wait, or a notifier that cannot
send (a mistyped GATEHOUSE_NOTIFIERS path, a webhook without its URL) fails `manage.py check`."""

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error
from django.core.exceptions import ImproperlyConfigured

from approvals.notifiers import get_notifier

NOTIFY_RETRY_CAP_S = 600.0
"""The longest notify backoff whatever the broker: ten minutes."""
REDIS_VISIBILITY_TIMEOUT_S = 3600
"""kombu's default for Redis when CELERY_BROKER_TRANSPORT_OPTIONS names none."""


def visibility_timeout_s() -> float:
    """Seconds the broker waits for an unacknowledged message before delivering it again."""
    options = settings.CELERY_BROKER_TRANSPORT_OPTIONS or {}
    return float(options.get("visibility_timeout", REDIS_VISIBILITY_TIMEOUT_S))


def notify_retry_cap_s() -> float:
    """The longest notify backoff: half the broker's visibility_timeout, at most ten minutes.

    A retry waits out its countdown in a worker, unacknowledged (acks_late); held past the
    visibility_timeout, the broker hands it out again and the notification is sent twice. The
    other half is margin for the wait behind a notify worker's busy threads."""
    return min(NOTIFY_RETRY_CAP_S, visibility_timeout_s() / 2)


def check_notify_backoff(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return [*_check_first_backoff(), *_check_resend_delay()]


def _check_first_backoff() -> list[CheckMessage]:
    base, cap = float(settings.NOTIFY_RETRY_BASE_S), notify_retry_cap_s()
    if base <= cap:
        return []
    return [
        Error(
            f"NOTIFY_RETRY_BASE_S ({base:g} s) exceeds half the broker's visibility_timeout "
            f"({visibility_timeout_s():g} s), the longest a notification may wait for its retry "
            "without being delivered twice.",
            hint="Lower NOTIFY_RETRY_BASE_S or raise CELERY_VISIBILITY_TIMEOUT.",
            id="approvals.E001",
        )
    ]


def _check_resend_delay() -> list[CheckMessage]:
    # A notice is touched at each try: one waiting out a retry's countdown (up to the cap) must not
    # look lost to the sweep, or every retrying notification would be sent twice.
    resend, cap = float(settings.NOTIFY_RESEND_AFTER_S), notify_retry_cap_s()
    if resend > cap:
        return []
    return [
        Error(
            f"NOTIFY_RESEND_AFTER_S ({resend:g} s) does not exceed the longest notify backoff ({cap:g} s): "
            "the sweep would resend notifications that are only waiting for their retry.",
            hint="Leave NOTIFY_RESEND_AFTER_S unset (the broker's visibility_timeout) or raise it.",
            id="approvals.E002",
        )
    ]


def check_notifiers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Each of GATEHOUSE_NOTIFIERS can send: a notification to one that cannot is given up at its
    first try (approvals.tasks.notify_task), so the mistake shows here, before any is lost."""
    problems: list[str] = []
    for path in settings.GATEHOUSE_NOTIFIERS:
        try:
            problems += get_notifier(path).configuration_problems()
        except ImproperlyConfigured as exc:
            problems.append(str(exc))
    return [Error(problem, id="approvals.E003") for problem in problems]
