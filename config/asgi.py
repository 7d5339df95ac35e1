"""ASGI entry point: HTTP through Django (the offline model ahead of it), WebSockets through
Channels consumers."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Each request in flight runs on a thread of its own, so persistent connections pile up until
# Postgres refuses new clients (seen under bench_load); Django advises CONN_MAX_AGE=0 here
# (`serve` gives the web process a pool instead).
os.environ.setdefault("DB_CONN_MAX_AGE", "0")

from config.asgi_handler import get_asgi_application

django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from agents.offline import server as offline_model  # noqa: E402
from approvals.routing import websocket_urlpatterns  # noqa: E402
from config import query_count  # noqa: E402
from config.asgi_scope import Receive, Scope, Send  # noqa: E402
from config.bad_text import BadTextWebSocketGuard  # noqa: E402
from config.websocket_origin import SameOriginValidator  # noqa: E402

query_count.install_from_env()  # benchmarks and tests count this process's queries


async def http(scope: Scope, receive: Receive, send: Send) -> None:
    """The offline model's one path, else Django."""
    if scope["path"] == offline_model.PATH:
        await offline_model.chat_completions(scope, receive, send)
    else:
        await django_asgi_app(scope, receive, send)


async def no_such_socket(scope: Scope, receive: Receive, send: Send) -> None:
    """A socket path no consumer serves: refused with 4404 (Channels' own "No route found"
    would crash the handshake, a 500)."""
    await receive()  # the handshake's websocket.connect; a close before accept refuses it
    await send({"type": "websocket.close", "code": 4404})


# Channels routes to ASGI apps; Django's stubs for re_path expect a view.
sockets = [*websocket_urlpatterns, re_path(r"", no_such_socket)]  # type: ignore[arg-type]

application = ProtocolTypeRouter(
    {
        "http": http,
        "websocket": BadTextWebSocketGuard(SameOriginValidator(AuthMiddlewareStack(URLRouter(sockets)))),
    }
)
