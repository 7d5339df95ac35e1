"""A Content-Security-Policy on every HTML response (Django 5.2 has no CSP middleware; 6.0 does).

Pages load only their own scripts and styles (no inline ones, no eval: htmx runs with
`allowEval: false` and without its injected indicator styles, see templates/base.html), connect
only to their own origin's HTTP and WebSocket, and cannot be framed.
"""

from collections.abc import Callable

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse

POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'{sockets}; frame-ancestors 'none'; base-uri 'self'; form-action 'self'; "
    "object-src 'none'"
)


def policy_for(request: HttpRequest) -> str:
    # Browsers differ on whether 'self' covers ws:/wss:, so name this host's sockets exactly.
    try:
        host = request.get_host()
    except DisallowedHost:
        return POLICY.format(sockets="")
    return POLICY.format(sockets=f" ws://{host} wss://{host}")


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.get("Content-Type", "").startswith("text/html"):
            response.headers.setdefault("Content-Security-Policy", policy_for(request))
        return response
