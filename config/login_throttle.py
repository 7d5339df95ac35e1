"""Throttle failed logins per username and per client IP, in the shared (Redis) cache.

Only failures count: a right password never adds to a counter, and resets its username's. Once
a username has LOGIN_FAILURES_PER_USER failures, or an address LOGIN_FAILURES_PER_IP, inside
LOGIN_FAILURE_WINDOW_S, every further attempt is refused until the window (which starts at the
first failure) runs out — the right password included. API tokens never pass through here.
"""

import logging
from typing import Any

import redis
from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

from approvals.access import Access

logger = logging.getLogger(__name__)

THROTTLED = "throttled"


def _keys(*, username: str, ip: str) -> list[tuple[str, int]]:
    # Usernames are matched case-insensitively so "Alice" and "alice" share one counter.
    return [
        (f"login-failures:user:{username.strip().lower()}", settings.LOGIN_FAILURES_PER_USER),
        (f"login-failures:ip:{ip}", settings.LOGIN_FAILURES_PER_IP),
    ]


def client_ip(request: HttpRequest | None) -> str:
    return (request.META.get("REMOTE_ADDR") or "unknown") if request is not None else "unknown"


def check_login_allowed(*, username: str, ip: str) -> bool:
    """Whether this username may try a password from this address now."""
    try:
        counts = cache.get_many([key for key, _ in _keys(username=username, ip=ip)])
    except redis.RedisError as exc:
        # Availability over throttling: a Redis outage must not lock every user out (or 500).
        logger.warning("login throttle unavailable, allowing the attempt: %s", exc)
        return True
    return all(counts.get(key, 0) < limit for key, limit in _keys(username=username, ip=ip))


def do_record_login_failure(*, username: str, ip: str) -> None:
    """Count a failed password against the username and the address."""
    try:
        for key, _ in _keys(username=username, ip=ip):
            # add() starts the window at the first failure; incr() keeps its expiry.
            cache.add(key, 0, timeout=settings.LOGIN_FAILURE_WINDOW_S)
            cache.incr(key)
    except (redis.RedisError, ValueError) as exc:
        logger.warning("login throttle could not count a failure: %s", exc)
    logger.warning("login failed username=%r ip=%s", username, ip)


def do_reset_login_failures(*, username: str) -> None:
    """Forget a username's failures after it logged in (the address keeps its count)."""
    try:
        cache.delete(_keys(username=username, ip="")[0][0])
    except redis.RedisError as exc:
        logger.warning("login throttle could not reset a username: %s", exc)


class ThrottledLoginMixin:
    """Refuse a throttled username or address before the password is checked."""

    request: HttpRequest | None

    @property
    def throttled(self) -> bool:
        return self.has_error("__all__", code=THROTTLED)  # type: ignore[attr-defined]

    def clean(self) -> dict:
        data: dict = self.cleaned_data  # type: ignore[attr-defined]
        username = data.get("username") or ""
        ip = client_ip(self.request)
        if not check_login_allowed(username=username, ip=ip):
            logger.warning("login refused (too many failures) username=%r ip=%s", username, ip)
            minutes = max(1, settings.LOGIN_FAILURE_WINDOW_S // 60)
            raise forms.ValidationError(
                f"Too many failed logins for this account or address. Try again in {minutes} minutes.",
                code=THROTTLED,
            )
        try:
            cleaned: dict = super().clean()  # type: ignore[misc]
        except forms.ValidationError:
            # Only a wrong password counts (the admin form also refuses right ones of non-staff).
            if getattr(self, "user_cache", None) is None:
                do_record_login_failure(username=username, ip=ip)
            raise
        do_reset_login_failures(username=username)
        return cleaned


class ThrottledAuthenticationForm(ThrottledLoginMixin, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(ThrottledLoginMixin, AdminAuthenticationForm):
    def confirm_login_allowed(self, user: Any) -> None:
        """The admin role, not is_staff, lets a user into Django admin (approvals.admin)."""
        AuthenticationForm.confirm_login_allowed(self, user)  # active
        if not Access.of(user).is_admin:
            raise forms.ValidationError(
                self.error_messages["invalid_login"],
                code="invalid_login",
                params={"username": self.username_field.verbose_name},
            )


class ThrottledLoginView(LoginView):
    """The login page; a refused (throttled) attempt answers 429."""

    form_class = ThrottledAuthenticationForm

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        return refused_with_429(super().form_invalid(form), form)


def refused_with_429(response: HttpResponse, form: Any) -> HttpResponse:
    """The login page's answer, with status 429 when its form refused a throttled attempt."""
    if isinstance(form, ThrottledLoginMixin) and form.is_bound and form.throttled:  # type: ignore[attr-defined]
        response.status_code = 429
    return response


@login_not_required
def throttled_admin_login(request: HttpRequest) -> HttpResponse:
    """Django admin's login page (its form throttled as above); a refused attempt answers 429."""
    response = admin.site.login(request)
    return refused_with_429(response, (getattr(response, "context_data", None) or {}).get("form"))
