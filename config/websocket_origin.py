"""WebSockets from this site only: the Origin must be the very host and port the socket
connects to, and that host must be in ALLOWED_HOSTS.

Channels' AllowedHostsOriginValidator compares host names only, so a page served from
another port of an allowed host (another app on the same machine) could open a socket with
the user's cookies. Behind a proxy, forward the Host header unchanged.
"""

from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from config.asgi_scope import App, Receive, Scope, Send, header


def same_origin(scope: Scope) -> bool:
    """The Origin's host:port is the Host the socket was opened on, and the host is allowed."""
    origin, host = header(scope, b"origin"), header(scope, b"host").lower()
    try:
        parts = urlsplit(origin)
        origin_netloc = parts.netloc.lower()
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not host or origin_netloc != host:
        return False
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


class SameOriginValidator:
    """Refuse (403) a WebSocket handshake from any other origin, port included."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and not same_origin(scope):
            await receive()  # the handshake's websocket.connect; a close before accept is a 403
            await send({"type": "websocket.close"})
            return
        await self.app(scope, receive, send)
