"""GET /healthz: is the database reachable, does Redis answer, how many Celery workers are alive.

Every probe has a short timeout so the endpoint answers within ~2 s even when a dependency hangs.
"""

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, JsonResponse
from redis.backoff import NoBackoff
from redis.retry import Retry

from config.celery import app as celery_app

# Query parameters whose name says secret: redis-py reads a password from `?password=`.
SECRET_QUERY_VALUE = re.compile(r"((?:[?&])[^=&#]*(?:pass|secret|token)[^=&#]*=)[^&#]*", re.IGNORECASE)


def masked_url(url: str) -> str:
    """The URL with any password (in its userinfo or its query) replaced by ***, safe to show."""
    parts = urlsplit(url)
    if parts.password is not None:
        userinfo, _, hostport = parts.netloc.rpartition("@")
        url = urlunsplit(parts._replace(netloc=f"{userinfo.partition(':')[0]}:***@{hostport}"))
    return SECRET_QUERY_VALUE.sub(r"\1***", url)


def check_database() -> dict[str, Any]:
    result: dict[str, Any] = {"ok": False, "vendor": connection.vendor}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            result["ok"] = cursor.fetchone() == (1,)
    except Exception as exc:
        result["error"] = str(exc).strip() or type(exc).__name__
    return result


def check_redis() -> dict[str, Any]:
    url = settings.REDIS_URL
    result: dict[str, Any] = {"ok": False, "url": masked_url(url)}
    try:
        # 1 s timeouts and no retries (redis-py otherwise backs off and retries for seconds).
        client = redis.Redis.from_url(
            url, socket_timeout=1, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)
        )
        with client:
            result["ok"] = bool(client.ping())
    except Exception as exc:
        result["error"] = str(exc) or type(exc).__name__
    return result


def check_celery() -> dict[str, Any]:
    try:
        replies = celery_app.control.ping(timeout=0.5) or []
    except Exception:
        replies = []
    return {"ok": bool(replies), "workers": len(replies)}


@login_not_required
def healthz(request: HttpRequest) -> JsonResponse:
    database = check_database()
    redis_status = check_redis()
    # The worker ping goes through the broker: without Redis it could only hang, so skip it.
    celery = check_celery() if redis_status["ok"] else {"ok": False, "workers": 0}
    ok = database["ok"] and redis_status["ok"]
    body = {"ok": ok, "database": database, "redis": redis_status, "celery": celery}
    return JsonResponse(body, status=200 if ok else 503)
