"""POST each notification as JSON, signed: `X-Gatehouse-Signature: sha256=<hex HMAC of the body>`."""

import hashlib
import hmac
import json
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from approvals.notifiers import BaseNotifier, Notification

TIMEOUT_S = 5.0


class WebhookFailed(Exception):
    """A delivery that failed, named by the receiver's host and the status or error class only:
    the URL may carry a secret (a Slack-style path token, `?token=`, `user:pass@`)."""


def sign(body: bytes, *, secret: str) -> str:
    """The signature header's value; receivers recompute it over the raw body and compare."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WebhookNotifier(BaseNotifier):
    """To NOTIFY_WEBHOOK_URL, signed with NOTIFY_WEBHOOK_SECRET. Any non-2xx answer is a failure."""

    def configuration_problems(self) -> list[str]:
        if settings.NOTIFY_WEBHOOK_URL and settings.NOTIFY_WEBHOOK_SECRET:
            return []
        return ["WebhookNotifier needs NOTIFY_WEBHOOK_URL and NOTIFY_WEBHOOK_SECRET"]

    def send(self, notification: Notification) -> None:
        if problems := self.configuration_problems():
            raise ImproperlyConfigured(problems[0])
        url, secret = settings.NOTIFY_WEBHOOK_URL, settings.NOTIFY_WEBHOOK_SECRET
        body = json.dumps(notification.as_dict(), sort_keys=True, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Gatehouse-Webhook/1",
            "X-Gatehouse-Event": notification.event,
            "X-Gatehouse-Delivery": notification.delivery_id,
            "X-Gatehouse-Signature": sign(body, secret=secret),
        }
        try:
            response = httpx.post(url, content=body, headers=headers, timeout=TIMEOUT_S)
        except httpx.InvalidURL:
            raise ImproperlyConfigured("NOTIFY_WEBHOOK_URL is not a valid URL") from None
        except httpx.HTTPError as exc:
            # httpx's messages quote the URL: neither this message nor its traceback may.
            raise WebhookFailed(f"webhook to {_host(url)} failed: {type(exc).__name__}") from None
        if not response.is_success:
            raise WebhookFailed(f"webhook to {_host(url)} answered {response.status_code}")


def _host(url: str) -> str:
    """The URL's host alone: no userinfo, path or query."""
    try:
        return urlsplit(url).hostname or "?"
    except ValueError:
        return "?"
