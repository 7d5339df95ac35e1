"""The authorization matrix: every page, API operation and WebSocket route, for each role.

Roles: anonymous, a reviewer of queue A (refunds), a reviewer of queue B (outreach), an operator
(in no queue team) and an admin (staff, as `seed_demo` makes one). Thread A waits at a refunds
gate, thread B at an outreach gate; both queues are restricted to their teams. Each cell is the
exact status code; a refused state-changing request must leave every row as it was. A row is
required for every URL pattern, API operation and WebSocket route, so a new endpoint without one
fails `test_the_matrix_covers_every_route`.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from approvals.actions.tokens import do_create_token
from approvals.api import api
from approvals.api.langgraph_server import api as langgraph_api
from approvals.models import ApprovalRequest, AuditEvent
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint, Thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "reviewer_a", "reviewer_b", "operator", "admin")
EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello"}


@dataclass
class World:
    users: dict[str, User | None]
    a: ApprovalRequest  # thread A's request, queue refunds (team A)
    b: ApprovalRequest  # thread B's request, queue outreach (team B)

    def fill(self, template: str) -> str:
        return template.format(
            A=self.a.thread_id,
            B=self.b.thread_id,
            a=self.a.pk,
            b=self.b.pk,
            cp=self.a.checkpoint_id,
            none=999999,  # an id nothing has
            fresh="lg-fresh-1",  # a thread id nothing has yet
            run="r1",
            graph="refunds_langgraph",  # a LangGraph agent: an assistant
            native="refunds",  # a native agent: no assistant
        )


@pytest.fixture
def world() -> World:
    admin = make_user("ada", "admin")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    users: dict[str, User | None] = {
        "anonymous": None,
        "reviewer_a": make_user("rita", "reviewer", queues=("refunds",)),
        "reviewer_b": make_user("sam", "reviewer", queues=("outreach",)),
        "operator": make_user("olga", "operator"),
        "admin": admin,
    }
    a = make_gate()
    b = make_gate(agent="outreach", action="send_email", args=EMAIL)
    return World(users=users, a=a, b=b)


@dataclass(frozen=True)
class Row:
    method: str
    path: str  # {A} {B}: thread ids; {a} {b}: request ids; {cp}: thread A's gate checkpoint
    codes: tuple[int, int, int, int, int]  # in ROLES order
    body: dict[str, Any] | None = None

    @property
    def changes_state(self) -> bool:
        return self.method != "get"


LOGIN = 302  # pages send anonymous users to the login page
# Pages (session login): anonymous, reviewer A, reviewer B, operator, admin.
PAGES = [
    Row("get", "/", (LOGIN, 200, 200, 200, 200)),
    Row("get", "/approvals/{a}/", (LOGIN, 200, 404, 404, 200)),
    Row("get", "/approvals/{b}/", (LOGIN, 404, 200, 404, 200)),
    Row("post", "/approvals/{a}/", (LOGIN, 302, 404, 404, 302), {"decision": "approve"}),
    Row("post", "/approvals/{b}/", (LOGIN, 404, 302, 404, 302), {"decision": "approve"}),
    Row("post", "/approvals/{a}/claim/", (LOGIN, 302, 404, 404, 302), {"op": "claim"}),
    Row("post", "/approvals/{a}/undo/", (LOGIN, 302, 404, 404, 302)),
    Row("get", "/ledger/", (LOGIN, 403, 403, 403, 200)),
    Row("get", "/ledger.csv", (LOGIN, 403, 403, 403, 200)),
    Row("get", "/threads/", (LOGIN, 200, 200, 200, 200)),
    Row("post", "/threads/", (LOGIN, 403, 403, 302, 302), {"agent": "refunds", "input": "Refund ORD-1001"}),
    Row("get", "/threads/{A}/", (LOGIN, 200, 404, 200, 200)),
    Row("get", "/threads/{B}/", (LOGIN, 404, 200, 200, 200)),
    Row("post", "/threads/{A}/control/pause/", (LOGIN, 403, 404, 302, 302)),
    Row("post", "/threads/{A}/control/cancel/", (LOGIN, 403, 404, 302, 302)),
    Row("get", "/threads/{A}/state/", (LOGIN, 403, 404, 200, 200)),
    Row("post", "/threads/{A}/state/", (LOGIN, 403, 404, 302, 302), {"values": "STATE"}),
    Row("post", "/threads/{A}/messages/", (LOGIN, 403, 404, 302, 302), {"input": "and another"}),
    Row("get", "/threads/{A}/checkpoints/{cp}/", (LOGIN, 200, 404, 200, 200)),
    Row("post", "/threads/{A}/checkpoints/{cp}/", (LOGIN, 403, 404, 302, 302), {"confirm": "1"}),
    Row("get", "/threads/{A}/diff/", (LOGIN, 200, 404, 200, 200)),
    Row("post", "/threads/{A}/standing/{none}/revoke/", (LOGIN, 404, 404, 403, 404)),
    Row("get", "/policies/preview/?policy={none}", (LOGIN, 403, 403, 403, 404)),
    Row("post", "/policies/preview/", (LOGIN, 403, 403, 403, 400), {"name": ""}),
    Row("get", "/admin/", (LOGIN, LOGIN, LOGIN, LOGIN, 200)),
    Row("get", "/admin/approvals/approvalrequest/", (LOGIN, LOGIN, LOGIN, LOGIN, 200)),
    Row("get", "/admin/approvals/auditevent/", (LOGIN, LOGIN, LOGIN, LOGIN, 200)),
    Row("get", "/admin/approvals/apitoken/", (LOGIN, LOGIN, LOGIN, LOGIN, 200)),
]
# The JSON API (bearer tokens): anonymous means no token.
NOAUTH = 401
APIS = [
    Row("get", "/api/threads", (NOAUTH, 200, 200, 200, 200)),
    Row(
        "post", "/api/threads", (NOAUTH, 403, 403, 201, 201), {"agent": "refunds", "input": "Refund ORD-1001"}
    ),
    Row("get", "/api/threads/{A}", (NOAUTH, 200, 404, 200, 200)),
    Row("get", "/api/threads/{B}", (NOAUTH, 404, 200, 200, 200)),
    Row("get", "/api/threads/{A}/history", (NOAUTH, 200, 404, 200, 200)),
    Row("get", "/api/threads/{A}/checkpoints/{cp}", (NOAUTH, 200, 404, 200, 200)),
    Row("get", "/api/threads/{A}/diff?from={cp}", (NOAUTH, 200, 404, 200, 200)),
    Row("get", "/api/threads/{A}/export", (NOAUTH, 200, 404, 200, 200)),
    Row("post", "/api/threads/{A}/pause", (NOAUTH, 403, 404, 200, 200)),
    Row("post", "/api/threads/{A}/resume", (NOAUTH, 403, 404, 409, 409)),
    Row("post", "/api/threads/{A}/cancel", (NOAUTH, 403, 404, 200, 200)),
    Row("patch", "/api/threads/{A}/state", (NOAUTH, 403, 404, 409, 409), {"values": {}}),  # nothing to write
    Row("post", "/api/threads/{A}/fork", (NOAUTH, 403, 404, 200, 200), {"checkpoint_id": "{cp}"}),
    Row("post", "/api/threads/{A}/messages", (NOAUTH, 403, 404, 409, 409), {"input": "and another"}),
    Row("post", "/api/imports", (NOAUTH, 403, 403, 400, 400), {"format": "nonsense"}),
    Row("get", "/api/approvals", (NOAUTH, 200, 200, 200, 200)),
    Row("post", "/api/approvals/{a}/decision", (NOAUTH, 200, 404, 404, 200), {"decision": "approve"}),
    Row("post", "/api/approvals/{b}/decision", (NOAUTH, 404, 200, 404, 200), {"decision": "approve"}),
    Row("post", "/api/approvals/{a}/claim", (NOAUTH, 200, 404, 404, 200), {"op": "claim"}),
    Row("post", "/api/approvals/{a}/undo", (NOAUTH, 409, 404, 404, 409)),
    Row("get", "/api/policies", (NOAUTH, 403, 403, 403, 200)),
    Row(
        "post",
        "/api/policies",
        (NOAUTH, 403, 403, 403, 400),
        {"name": "x", "tool": "issue_refund", "when": "((", "action": "approve"},
    ),
    Row(
        "post",
        "/api/policies/preview",
        (NOAUTH, 403, 403, 403, 400),
        {"name": "x", "tool": "issue_refund", "when": "((", "action": "approve"},
    ),
    Row("get", "/api/policies/{none}", (NOAUTH, 403, 403, 403, 404)),
    Row("patch", "/api/policies/{none}", (NOAUTH, 403, 403, 403, 404), {"enabled": False}),
    Row("delete", "/api/policies/{none}", (NOAUTH, 403, 403, 403, 404)),
]
# The LangGraph server API (x-api-key tokens). Threads A and B are native: not LangGraph threads.
ASK = {"messages": [{"role": "user", "content": "Refund ORD-1001"}]}
LANGGRAPH = [
    # What the server serves, as LangGraph's /info says it (Agent Inbox asks before a token is set).
    Row("get", "/langgraph/info", (200, 200, 200, 200, 200)),
    Row("post", "/langgraph/assistants/search", (NOAUTH, 200, 200, 200, 200), {}),
    Row("get", "/langgraph/assistants/{graph}", (NOAUTH, 200, 200, 200, 200)),
    Row("get", "/langgraph/assistants/{native}", (NOAUTH, 404, 404, 404, 404)),
    Row("post", "/langgraph/threads", (NOAUTH, 200, 200, 200, 200), {}),
    Row("post", "/langgraph/threads/search", (NOAUTH, 200, 200, 200, 200), {}),
    Row("get", "/langgraph/threads/{A}", (NOAUTH, 404, 404, 404, 404)),
    Row("get", "/langgraph/threads/{A}/state", (NOAUTH, 404, 404, 404, 404)),
    # A LangGraph thread's update_state: reviewers 403, operators 200 (tests/test_langgraph_server_api.py).
    Row("post", "/langgraph/threads/{A}/state", (NOAUTH, 404, 404, 404, 404), {"values": {"messages": []}}),
    Row("post", "/langgraph/threads/{fresh}/state", (NOAUTH, 404, 404, 404, 404), {"as_node": "__end__"}),
    Row(
        "post",
        "/langgraph/threads/{fresh}/runs",
        (NOAUTH, 403, 403, 200, 200),
        {"assistant_id": "refunds_langgraph", "input": ASK},
    ),
    Row(
        "post",
        "/langgraph/threads/{A}/runs",
        (NOAUTH, 404, 404, 404, 404),
        {"assistant_id": "refunds_langgraph", "command": {"resume": {"decisions": [{"type": "approve"}]}}},
    ),
    # Thread A is not a LangGraph thread (404); reviewer_b, who may not see it, is answered as
    # about a missing thread: a run that starts one needs a message (422).
    Row(
        "post",
        "/langgraph/threads/{A}/runs/wait",
        (NOAUTH, 404, 422, 404, 404),
        {"assistant_id": "refunds_langgraph"},
    ),
    Row("get", "/langgraph/threads/{A}/runs", (NOAUTH, 404, 404, 404, 404)),
    Row("get", "/langgraph/threads/{A}/runs/{run}", (NOAUTH, 404, 404, 404, 404)),
    Row("get", "/langgraph/threads/{A}/runs/{run}/join", (NOAUTH, 404, 404, 404, 404)),
    Row("get", "/langgraph/threads/{A}/runs/{run}/stream", (NOAUTH, 404, 404, 404, 404)),
    Row("post", "/langgraph/threads/{A}/runs/{run}/cancel", (NOAUTH, 404, 404, 404, 404), {}),
    Row("delete", "/langgraph/threads/{A}/runs/{run}", (NOAUTH, 404, 404, 404, 404)),
    Row("post", "/langgraph/threads/{A}/history", (NOAUTH, 404, 404, 404, 404), {}),
    Row(
        "post",
        "/langgraph/threads/{fresh}/runs/stream",
        (NOAUTH, 403, 403, 200, 200),
        {"assistant_id": "refunds_langgraph", "input": ASK},
    ),
    Row(
        "post",
        "/langgraph/threads/{A}/runs/stream",
        (NOAUTH, 404, 404, 404, 404),
        {"assistant_id": "refunds_langgraph", "command": {"resume": {"decisions": [{"type": "approve"}]}}},
    ),
    # Stateless runs start a thread of their own: an operator's or an admin's, as any start.
    Row(
        "post",
        "/langgraph/runs",
        (NOAUTH, 403, 403, 200, 200),
        {"assistant_id": "refunds_langgraph", "input": ASK, "on_completion": "keep"},
    ),
    Row(
        "post",
        "/langgraph/runs/stream",
        (NOAUTH, 403, 403, 200, 200),
        {"assistant_id": "refunds_langgraph", "input": ASK},
    ),
    # A wait would wait for a worker here; its rights are runs.stream's (tests/test_langgraph_stateless.py).
    Row("post", "/langgraph/runs/wait", (NOAUTH, 422, 422, 422, 422), {"assistant_id": "refunds_langgraph"}),
]


def snapshot() -> list[Any]:
    """Everything a refused request must leave as it was."""
    return [
        list(Thread.objects.order_by("pk").values_list("pk", "status", "head_id")),
        list(ApprovalRequest.objects.order_by("pk").values_list("pk", "status", "claimed_by_id")),
        Checkpoint.objects.count(),
        AuditEvent.objects.count(),
    ]


def page_client(user: User | None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def api_client(user: User | None) -> Client:
    if user is None:
        return Client()
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=user)}"})


def send(client: Client, row: Row, world: World, *, json_body: bool) -> int:
    path = world.fill(row.path)
    body = {k: world.fill(v) if isinstance(v, str) else v for k, v in (row.body or {}).items()}
    if body.get("values") == "STATE":
        body["values"] = json.dumps(get_backend().get(thread_id=world.a.thread_id).values)
    call: Callable[..., Any] = getattr(client, row.method)
    if row.method == "get":
        return int(call(path).status_code)
    if json_body:
        return int(call(path, json.dumps(body), content_type="application/json").status_code)
    return int(call(path, body).status_code)


def cases(rows: list[Row]) -> list[Any]:
    return [
        pytest.param(row, role, id=f"{row.method.upper()} {row.path} as {role}")
        for row in rows
        for role in ROLES
    ]


@pytest.mark.parametrize(("row", "role"), cases(PAGES))
def test_pages_answer_each_role_as_the_matrix_says(row: Row, role: str, world: World) -> None:
    before = snapshot()

    status = send(page_client(world.users[role]), row, world, json_body=False)

    assert status == row.codes[ROLES.index(role)]
    if row.changes_state and status in (302, 401, 403, 404) and (status != 302 or role == "anonymous"):
        assert snapshot() == before


@pytest.mark.parametrize(("row", "role"), cases(APIS))
def test_api_operations_answer_each_role_as_the_matrix_says(row: Row, role: str, world: World) -> None:
    before = snapshot()

    status = send(api_client(world.users[role]), row, world, json_body=True)

    assert status == row.codes[ROLES.index(role)]
    if row.changes_state and status in (400, 401, 403, 404, 409):
        assert snapshot() == before


@pytest.mark.parametrize(("row", "role"), cases(LANGGRAPH))
def test_langgraph_api_operations_answer_each_role_as_the_matrix_says(
    row: Row, role: str, world: World
) -> None:
    user = world.users[role]
    client = Client(headers={"x-api-key": do_create_token(user=user)}) if user is not None else Client()
    before = snapshot()

    status = send(client, row, world, json_body=True)

    assert status == row.codes[ROLES.index(role)]
    if status in (400, 401, 403, 404, 409, 422) or row.path.startswith("/langgraph/threads/search"):
        assert snapshot() == before


def test_each_role_lists_only_the_requests_and_threads_of_its_queues(world: World) -> None:
    seen = {}
    for role in ROLES[1:]:
        user = world.users[role]
        api = api_client(user)
        approvals = {r["id"] for r in api.get("/api/approvals").json()}
        threads = {t["id"] for t in api.get("/api/threads").json()}
        inbox = page_client(user).get("/").content.decode()
        seen[role] = (
            approvals,
            threads,
            f"/approvals/{world.a.pk}/" in inbox,
            f"/approvals/{world.b.pk}/" in inbox,
        )
    a, b = world.a, world.b
    both = {a.thread_id, b.thread_id}
    assert seen["reviewer_a"] == ({a.pk}, {a.thread_id}, True, False)
    assert seen["reviewer_b"] == ({b.pk}, {b.thread_id}, False, True)
    assert seen["operator"] == (set(), both, False, False)  # steers threads; decides nothing
    assert seen["admin"] == ({a.pk, b.pk}, both, True, True)


# --- WebSockets ------------------------------------------------------------------------------

UNAUTHENTICATED, FORBIDDEN, ACCEPTED = 4401, 4403, "accepted"
SOCKETS = [
    ("/ws/inbox/", (UNAUTHENTICATED, ACCEPTED, ACCEPTED, ACCEPTED, ACCEPTED)),
    ("/ws/threads/{A}/", (UNAUTHENTICATED, ACCEPTED, FORBIDDEN, ACCEPTED, ACCEPTED)),
    ("/ws/threads/{B}/", (UNAUTHENTICATED, FORBIDDEN, ACCEPTED, ACCEPTED, ACCEPTED)),
    ("/ws/threads/no-such-thread/", (UNAUTHENTICATED, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN)),
]


def socket_answer(path: str, user: User | None) -> tuple[int | str, str]:
    """Connect as the user (session cookie, same origin); return the close code or "accepted",
    and the first message."""
    from config.asgi import application

    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if user is not None:
        client = page_client(user)
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))

    async def connect() -> tuple[int | str, str]:
        communicator = WebsocketCommunicator(application, path, headers=headers)
        connected, code = await communicator.connect(timeout=5)
        if not connected:
            return int(code or 0), ""
        first = ""
        if not await communicator.receive_nothing(timeout=0.5):
            first = str((await communicator.receive_output(timeout=5)).get("text", ""))
        await communicator.disconnect()
        return ACCEPTED, first

    return async_to_sync(connect)()


def socket_cases() -> list[Any]:
    return [pytest.param(p, r, id=f"{p} as {r}") for p, _ in SOCKETS for r in ROLES]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("path", "role"), socket_cases())
def test_websockets_admit_each_role_as_the_matrix_says(
    path: str, role: str, world: World, in_memory_layer: Any
) -> None:
    expected = dict(SOCKETS)[path][ROLES.index(role)]

    answer, first = socket_answer(world.fill(path), world.users[role])

    assert answer == expected
    if path == "/ws/inbox/" and answer == ACCEPTED:
        sees = (f"approval-{world.a.pk}" in first, f"approval-{world.b.pk}" in first)
        assert (
            sees
            == {
                "reviewer_a": (True, False),
                "reviewer_b": (False, True),
                "operator": (False, False),
                "admin": (True, True),
            }[role]
        )


# --- Completeness ----------------------------------------------------------------------------


def route_templates(resolver: URLResolver, prefix: str = "") -> list[str]:
    found = []
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            if prefix + str(entry.pattern) in ("admin/", "api/", "langgraph/", "offline/"):
                continue
            found += route_templates(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            found.append("/" + prefix + str(entry.pattern))
    return found


def test_the_matrix_covers_every_route() -> None:
    import re

    from approvals.routing import websocket_urlpatterns

    def shape(path: str) -> str:
        path = path.split("?")[0]
        return re.sub(r"<[^>]+>|\{[^}]+\}", "*", path).replace("/pause/", "/*/").replace("/cancel/", "/*/")

    public = {"/healthz", "/login/", "/logout/", "/admin/login/"}
    pages = {shape(p) for p in route_templates(get_resolver())} - public
    assert pages <= {shape(r.path) for r in PAGES}
    operations = {(m, shape(p)) for p, ops in api.get_openapi_schema()["paths"].items() for m in ops}
    assert operations <= {(r.method, shape(r.path)) for r in APIS}
    langgraph = {(m, shape(p)) for p, ops in langgraph_api.get_openapi_schema()["paths"].items() for m in ops}
    assert langgraph <= {(r.method, shape(r.path)) for r in LANGGRAPH}
    sockets = {shape("/" + str(p.pattern)) for p in websocket_urlpatterns}
    assert sockets <= {shape(p) for p, _ in SOCKETS}
