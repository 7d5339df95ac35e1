"""POST each notification as JSON, signed: `X-Gatehouse-Signature: sha256=<hex HMAC of the body>`."""

import hashlib
import hmac
import json

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from approvals.notifiers import BaseNotifier, Notification

TIMEOUT_S = 5.0


def sign(body: bytes, *, secret: str) -> str:
    """The signature header's value; receivers recompute it over the raw body and compare."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WebhookNotifier(BaseNotifier):
    """To NOTIFY_WEBHOOK_URL, signed with NOTIFY_WEBHOOK_SECRET. Any non-2xx answer is a failure."""

    def send(self, notification: Notification) -> None:
        url, secret = settings.NOTIFY_WEBHOOK_URL, settings.NOTIFY_WEBHOOK_SECRET
        if not url or not secret:
            raise ImproperlyConfigured("WebhookNotifier needs NOTIFY_WEBHOOK_URL and NOTIFY_WEBHOOK_SECRET")
        body = json.dumps(notification.as_dict(), sort_keys=True, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Gatehouse-Webhook/1",
            "X-Gatehouse-Event": notification.event,
            "X-Gatehouse-Delivery": notification.delivery_id,
            "X-Gatehouse-Signature": sign(body, secret=secret),
        }
        response = httpx.post(url, content=body, headers=headers, timeout=TIMEOUT_S)
        response.raise_for_status()
