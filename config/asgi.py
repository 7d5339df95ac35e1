"""ASGI entry point: HTTP through Django, WebSockets through Channels consumers."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Under ASGI each request runs in a thread of its own, so persistent connections pile up until
# Postgres refuses new clients (seen under bench_load); Django advises CONN_MAX_AGE=0 here.
os.environ.setdefault("DB_CONN_MAX_AGE", "0")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from approvals.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
