"""The generalized bad-input sweep: every string parameter of every operation of both APIs
(`/api` and the LangGraph server at `/langgraph`; path, query and body fields, from each
OpenAPI document), every page's path parameters and every socket path
is tried with a NUL, a lone surrogate, an over-long value and a wrong type. Nothing is a 5xx.

In-process (Django's test client re-raises a view's exception, so a 500 cannot hide); the live
fuzzing with schemathesis is in tests/test_security_input.py."""

import json
import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from approvals.actions.tokens import do_create_token
from approvals.api import api as ninja_api
from approvals.api.langgraph_server import api as langgraph_api
from approvals.models import ApprovalRequest
from approvals.routing import websocket_urlpatterns
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

LONG = "L" * 10_000
# (name, value in a URL, value in a JSON body). A lone surrogate cannot be percent-encoded as
# UTF-8, so in URLs it comes as the bytes a client would send for one (CESU-8 / WTF-8).
BAD = [
    ("nul", "a%00b", "a\x00b"),
    ("surrogate", "x%ED%A0%80", "x\ud800"),
    ("long", LONG, LONG),
    ("wrong type", "1e999", 12345),
]
WRONG_TYPES = [12345, ["a"], {"a": 1}, None, True]


def admin_user() -> Any:
    ada = make_user("ada", "admin")
    ada.is_staff = ada.is_superuser = True
    ada.save()
    return ada


def send(client: Client, method: str, path: str, body: Any = None) -> int:
    if method == "get":
        return int(client.get(path).status_code)
    data = json.dumps(body) if body is not None else ""
    return int(getattr(client, method)(path, data, content_type="application/json").status_code)


APIS = {"api": ninja_api, "langgraph": langgraph_api}


def operations(api: str) -> list[tuple[str, str, dict[str, Any]]]:
    schema = APIS[api].get_openapi_schema()
    found = []
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            found.append((method, path, op))
    return found


def body_fields(api: str, op: dict[str, Any]) -> list[str]:
    schema = APIS[api].get_openapi_schema()
    content = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    ref = content.get("schema", {}).get("$ref", "")
    if not ref:
        return []
    model = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return list(model.get("properties", {}))


def api_cases() -> list[Any]:
    """One case per operation; each tries every parameter with every bad value."""
    return [
        pytest.param(api, m, p, id=f"{m} {p}")
        for api in APIS
        for m, p, op in operations(api)
        if op.get("parameters") or body_fields(api, op)
    ]


def parameters(api: str, op: dict[str, Any]) -> list[tuple[str, str]]:
    body = [("body", f) for f in body_fields(api, op)]
    return [(p["in"], p["name"]) for p in op.get("parameters", [])] + body


def fill(path: str, real: dict[str, str], bad: tuple[str, str] | None = None) -> str:
    """Put the real rows' ids in the path, and `bad` = (name, value) in place of one of them."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        return bad[1] if bad and bad[0] == name else real.get(name, "x")

    return re.sub(r"\{([^}]+)\}", value, path)


@pytest.mark.parametrize(("api", "method", "path"), api_cases())
def test_a_bad_value_in_any_parameter_of_an_api_operation_is_never_a_5xx(
    api: str, method: str, path: str
) -> None:
    gate = make_gate()
    token = do_create_token(user=admin_user())
    client = Client(
        headers={"x-api-key": token} if api == "langgraph" else {"Authorization": f"Bearer {token}"}
    )
    real = {
        "thread_id": gate.thread_id,
        "approval_id": str(gate.pk),
        "checkpoint_id": str(gate.checkpoint_id),
        "assistant_id": "refunds_langgraph",
    }
    op = next(op for m, p, op in operations(api) if (m, p) == (method, path))
    fields = body_fields(api, op)
    base: dict[str, Any] = {
        k: v
        for k, v in {
            "agent": "refunds",
            "input": "hi",
            "decision": "reject",
            "message": "no",
            "op": "claim",
            "checkpoint_id": str(gate.checkpoint_id),
            "values": {},
            "assistant_id": "refunds_langgraph",
        }.items()
        if k in fields
    }
    body = base if method != "get" else None
    tried, failures = 0, []
    for where, name in parameters(api, op):
        for label, url_value, body_value in BAD:
            if where == "path":
                attempts = [(fill(path, real, (name, url_value)), body)]
            elif where == "query":
                attempts = [(f"{fill(path, real)}?{name}={url_value}", body)]
            else:
                values = WRONG_TYPES if label == "wrong type" else [body_value]
                attempts = [(fill(path, real), {**base, name: v}) for v in values]
            for url, payload in attempts:
                status = send(client, method, url, payload)
                tried += 1
                if status >= 500:
                    failures.append((where, name, label, status))

    assert tried >= 4 and failures == []


def page_routes(resolver: URLResolver | None = None, prefix: str = "") -> list[str]:
    found = []
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            if prefix + str(entry.pattern) in ("admin/", "api/", "offline/"):
                continue
            found += page_routes(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern) and "<" in str(entry.pattern):
            found.append("/" + prefix + str(entry.pattern))
    return found


@pytest.mark.parametrize("route", page_routes())
def test_a_bad_value_in_any_page_path_is_never_a_5xx(route: str) -> None:
    gate = make_gate()
    page = Client()
    page.force_login(admin_user())
    real = {
        "thread_id": gate.thread_id,
        "pk": str(gate.pk),
        "checkpoint_id": str(gate.checkpoint_id),
        "verb": "pause",
    }
    failures = []
    for name in re.findall(r"<(?:\w+:)?(\w+)>", route):
        for label, url_value, _ in BAD:
            path = fill(re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route), real, (name, url_value))
            for response in (page.get(path), page.post(path, {"values": "{}", "input": "hi"})):
                if response.status_code >= 500:
                    failures.append((name, label, response.status_code))

    assert failures == []


SOCKET_VALUES = ["a\x00b", "x\ud800", LONG, "é-ünïcode", "a b", "12345"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "value", SOCKET_VALUES, ids=["nul", "surrogate", "long", "unicode", "space", "number"]
)
def test_a_bad_value_in_any_socket_path_is_refused_or_admitted_never_a_crash(
    value: str, in_memory_layer: Any
) -> None:
    from config.asgi import application

    client = Client()
    client.force_login(admin_user())
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", cookie)]
    routes = ["/" + re.sub(r"<(?:\w+:)?\w+>", "{}", str(p.pattern)) for p in websocket_urlpatterns]
    answers = []

    async def connect(path: str, query: str) -> Any:
        communicator = WebsocketCommunicator(application, path, headers=headers)
        communicator.scope["query_string"] = query.encode("utf-8", "surrogatepass")  # as a client can send
        connected, code = await communicator.connect(timeout=5)
        if connected:
            await communicator.disconnect()
        return connected, code

    for route in routes:
        path = route.replace("{}", value) if "{}" in route else route
        answers.append(async_to_sync(connect)(path, f"agent={value}&queue={value}"))

    # A crash inside connect would raise out of the communicator (or time out); every answer is
    # an orderly accept or close with a code.
    assert all(connected or code is not None for connected, code in answers), answers
    assert ApprovalRequest.objects.count() == 0
