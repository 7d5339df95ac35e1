"""Bad input gets a clear 4xx and changes nothing: malformed JSON, wrong types, unknown fields,
oversized bodies and values, unknown agents, ids that do not exist. Then the whole API, fuzzed
from its OpenAPI document with schemathesis against the live server: never a 5xx."""

import html
import json
from typing import Any

import httpx
import pytest
from django.test import Client
from pytest_django.fixtures import Settings

from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, AuditEvent
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint, Thread
from tests.factories import make_gate, make_user
from tests.live import LiveServices

pytestmark = pytest.mark.django_db


@pytest.fixture
def api() -> Client:
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=make_user('ada', 'admin'))}"})


def everything() -> list[Any]:
    return [
        list(Thread.objects.order_by("pk").values_list("pk", "status", "head_id")),
        list(ApprovalRequest.objects.order_by("pk").values_list("pk", "status", "decision_args")),
        Checkpoint.objects.count(),
        AuditEvent.objects.count(),
    ]


def send(api: Client, method: str, path: str, body: Any) -> Any:
    if method == "get":
        return api.get(path)
    raw = body if isinstance(body, str | bytes) else json.dumps(body)
    return getattr(api, method)(path, raw, content_type="application/json")


def bad_requests(gate: ApprovalRequest) -> list[tuple[str, str, Any, int]]:
    thread, pk = gate.thread_id, gate.pk
    decide = f"/api/approvals/{pk}/decision"
    big = "x" * 300_000  # over MAX_REQUEST_BYTES (256 KiB)
    return [
        ("post", "/api/threads", "{not json", 400),
        ("post", "/api/threads", b"\xff\xfe\x00", 400),
        ("post", "/api/threads", [], 400),
        ("post", "/api/threads", {"agent": 7, "input": ["a"]}, 400),
        ("post", "/api/threads", {"agent": "nope", "input": "hi"}, 400),
        ("post", "/api/threads", {"agent": "refunds", "input": "x" * 20_001}, 400),
        ("post", "/api/threads", {"agent": "refunds", "input": "hi", "thread_id": "../../etc"}, 400),
        ("post", "/api/threads", {"agent": "refunds", "input": big}, 413),
        ("post", decide, "{", 400),
        ("post", decide, {"decision": "explode"}, 400),
        ("post", decide, {"decision": "approve", "args": "not an object"}, 400),
        ("post", decide, {"decision": "approve", "args": {"order_id": "ORD-1001", "amount_cents": 1}}, 400),
        ("post", decide, {"decision": "reject", "message": "no", "args": {"amount_cents": 1}}, 400),
        ("post", decide, {"decision": "edit", "args": {"order_id": "ORD-1", "amount_cents": "lots"}}, 400),
        (
            "post",
            decide,
            {"decision": "edit", "args": {"order_id": "ORD-1", "amount_cents": 5, "to": "x"}},
            400,
        ),
        ("post", decide, {"decision": "edit", "args": {"order_id": "ORD-1", "amount_cents": 10**12}}, 400),
        ("post", decide, {"decision": "reject", "message": "m" * 5001}, 400),
        ("post", decide, {"decision": "reject"}, 400),
        ("post", "/api/approvals/999999/decision", {"decision": "approve"}, 404),
        ("post", "/api/approvals/9223372036854775808/decision", {"decision": "approve"}, 404),
        ("post", "/api/approvals/99999999999999999999/claim", {"op": "claim"}, 404),
        ("post", "/api/approvals/not-a-number/decision", {"decision": "approve"}, 400),
        ("get", "/api/threads/no-such-thread", None, 404),
        ("get", f"/api/threads/{thread}/checkpoints/not-a-uuid", None, 404),
        ("get", f"/api/threads/{thread}/checkpoints/00000000-0000-0000-0000-000000000000", None, 404),
        ("get", f"/api/threads/{thread}/diff?from=nope", None, 404),
        ("get", "/api/threads?limit=abc", None, 400),
        ("get", "/api/threads?offset=-1", None, 400),
        ("get", "/api/threads?q=" + "w" * 201, None, 400),
        ("get", "/api/threads?decided_by=" + "u" * 151, None, 400),
        ("get", "/api/approvals?queue=" + "q" * 65, None, 400),
        ("get", "/api/threads?offset=9223372036854775808", None, 400),
        ("get", "/api/threads?offset=99999999999999999999", None, 400),
        ("get", "/api/approvals?status=everything", None, 400),
        ("patch", f"/api/threads/{thread}/state", {"values": {"messages": "not a list"}}, 400),
        ("patch", f"/api/threads/{thread}/state", {"values": {"messages": [{"x": "y" * 1_100_000}]}}, 413),
        ("patch", f"/api/threads/{thread}/state", {"values": []}, 400),
        ("post", f"/api/threads/{thread}/fork", {"checkpoint_id": "nope"}, 404),
        ("post", f"/api/threads/{thread}/messages", {"input": "   "}, 400),
        ("post", f"/api/threads/{thread}/messages", {"input": "x" * 20_001}, 400),
        ("post", "/api/imports", {"format": "other"}, 400),
    ]


def test_bad_input_gets_a_clear_4xx_and_changes_nothing(api: Client, settings: Settings) -> None:
    gate = make_gate()
    before = everything()
    wrong = []
    for method, path, body, expected in bad_requests(gate):
        response = send(api, method, path, body)
        is_json = response.headers.get("Content-Type", "").startswith("application/json")
        clear = is_json and bool(response.json().get("detail"))
        if (response.status_code, clear) != (expected, True):
            wrong.append((method, path, str(body)[:40], response.status_code, response.content[:120]))
    assert wrong == []
    assert everything() == before


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/api/approvals/{pk}/decision", {"decision": "reject", "mesage": "typo"}),
        ("post", "/api/approvals/{pk}/claim", {"op": "claim", "too": "sam"}),
        ("post", "/api/threads", {"agent": "refunds", "input": "hi", "thread": "x"}),
        ("patch", "/api/threads/{thread}/state", {"values": {}, "valeus": {}}),
        ("post", "/api/threads/{thread}/fork", {"checkpoint_id": "{cp}", "vals": {}}),
        ("post", "/api/threads/{thread}/messages", {"input": "hi", "inptu": "x"}),
    ],
)
def test_unknown_top_level_fields_are_refused_not_ignored(
    api: Client, method: str, path: str, body: dict[str, Any]
) -> None:
    gate = make_gate()
    names = {"pk": gate.pk, "thread": gate.thread_id, "cp": gate.checkpoint_id}
    filled = {k: v.format(**names) if isinstance(v, str) else v for k, v in body.items()}
    before = everything()

    response = send(api, method, path.format(**names), filled)

    assert response.status_code == 400
    assert everything() == before


def test_a_form_with_bad_state_json_is_a_400_and_an_oversized_form_body_a_413_changing_nothing() -> None:
    ada = make_user("ada", "admin")
    client = Client(enforce_csrf_checks=True)  # as a browser: CSRF reads the form before the view
    client.force_login(ada)
    gate = make_gate()
    get_backend().set_status(thread_id=gate.thread_id, status="paused")  # type: ignore[arg-type]
    client.get("/threads/")
    token = {"X-CSRFToken": client.cookies["csrftoken"].value}
    before = everything()

    bad_json = client.post(f"/threads/{gate.thread_id}/state/", {"values": "{oops"}, headers=token)
    too_big = client.post("/threads/", {"agent": "refunds", "input": "x" * 300_000}, headers=token)

    assert bad_json.status_code == 400
    assert too_big.status_code == 413
    assert "over the limit of 262,144 bytes (MAX_REQUEST_BYTES)" in too_big.content.decode()
    assert everything() == before


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[" * 5000 + "]" * 5000, "nests deeper than 100 levels"),  # Python's parser: RecursionError
        ('{"messages": ' + "[" * 101 + "]" * 101 + "}", "nests deeper than 100 levels"),
        ('{"x": ' + "1" * 4301 + "}", "Exceeds the limit (4300 digits)"),
        ('{"x": NaN}', "NaN is not a JSON number"),
    ],
)
def test_the_state_editor_and_the_fork_page_say_why_they_cannot_read_the_json(text: str, said: str) -> None:
    client = Client()
    client.force_login(make_user("ada", "admin"))
    gate = make_gate()
    get_backend().set_status(thread_id=gate.thread_id, status="paused")  # type: ignore[arg-type]
    before = everything()

    edit = client.post(f"/threads/{gate.thread_id}/state/", {"values": text})
    fork = client.post(f"/threads/{gate.thread_id}/checkpoints/{gate.checkpoint_id}/", {"values": text})
    confirm = client.post(
        f"/threads/{gate.thread_id}/checkpoints/{gate.checkpoint_id}/", {"values": text, "confirm": "1"}
    )

    for page in (edit, fork, confirm):
        assert page.status_code == 400 and said in html.unescape(page.content.decode())
    assert everything() == before


@pytest.mark.parametrize(
    "arguments",
    ['{"order_id": "ORD-1001", "amount_cents": 1' + "0" * 4400 + "}", "[" * 3000 + "]" * 3000],
)
def test_a_call_whose_arguments_text_cannot_be_read_is_refused_by_its_tool_not_a_500(
    api: Client, arguments: str
) -> None:
    # The arguments are the model's text: unreadable, they are the tool's to refuse (no gate).
    gate = make_gate()
    call = {"id": "c9", "type": "function", "function": {"name": "issue_refund", "arguments": arguments}}
    messages = [
        {"id": "m1", "role": "user", "content": "refund ORD-1001"},
        {"id": "m2", "role": "assistant", "content": None, "tool_calls": [call]},
    ]
    page = Client()
    page.force_login(make_user("olga", "operator"))

    preview = page.post(
        f"/threads/{gate.thread_id}/checkpoints/{gate.checkpoint_id}/",
        {"values": json.dumps({"messages": messages})},
    )
    edit = send(api, "patch", f"/api/threads/{gate.thread_id}/state", {"values": {"messages": messages}})

    assert (preview.status_code, edit.status_code) == (200, 200), edit.content[:300]
    assert not ApprovalRequest.objects.filter(thread_id=gate.thread_id, key="c9").exists()


def calls(*ids: str) -> list[dict[str, Any]]:
    arguments = json.dumps({"order_id": "ORD-1001", "amount_cents": 500})
    return [
        {"id": i, "type": "function", "function": {"name": "issue_refund", "arguments": arguments}}
        for i in ids
    ]


@pytest.mark.parametrize(
    ("tool_calls", "field"),
    [
        ([{"foo": 1}], "messages.1.tool_calls.0.id"),
        ("not a list", "messages.1.tool_calls"),
        ([{"id": "c1", "function": {"arguments": "{}"}}], "messages.1.tool_calls.0.function.name"),
        ([{"id": 7, "function": {"name": "issue_refund"}}], "messages.1.tool_calls.0.id"),
        (calls("c1", "c1"), "messages.1.tool_calls"),
    ],
)
def test_a_state_edit_or_fork_with_malformed_tool_calls_is_a_400_naming_the_field(
    api: Client, tool_calls: Any, field: str
) -> None:
    gate = make_gate()
    messages = [
        {"id": "m1", "role": "user", "content": "refund ORD-1001"},
        {"id": "m2", "role": "assistant", "content": None, "tool_calls": tool_calls},
    ]
    before = everything()

    edit = send(api, "patch", f"/api/threads/{gate.thread_id}/state", {"values": {"messages": messages}})
    fork = send(
        api,
        "post",
        f"/api/threads/{gate.thread_id}/fork",
        {"checkpoint_id": str(gate.checkpoint_id), "values": {"messages": messages}},
    )

    assert (edit.status_code, fork.status_code) == (400, 400)
    assert field in edit.json()["errors"] and field in fork.json()["errors"]
    assert everything() == before


def test_a_state_edit_with_well_formed_parallel_calls_opens_one_gate_each(api: Client) -> None:
    gate = make_gate()
    messages = [
        {"id": "m1", "role": "user", "content": "refund ORD-1001 twice"},
        {"id": "m2", "role": "assistant", "content": None, "tool_calls": calls("c1", "c2")},
    ]

    edit = send(api, "patch", f"/api/threads/{gate.thread_id}/state", {"values": {"messages": messages}})

    assert edit.status_code == 200, edit.content
    assert sorted(ApprovalRequest.objects.filter(status="pending").values_list("key", flat=True)) == [
        "c1",
        "c2",
    ]


def test_a_message_over_max_input_chars_is_refused_by_the_api_and_the_page_as_at_start(
    api: Client, settings: Settings
) -> None:
    settings.MAX_INPUT_CHARS = 100
    gate = make_gate()
    get_backend().set_status(thread_id=gate.thread_id, status="done")  # type: ignore[arg-type]
    page = Client()
    page.force_login(make_user("olga", "operator"))
    before = everything()

    start = send(api, "post", "/api/threads", {"agent": "refunds", "input": "x" * 101})
    by_api = send(api, "post", f"/api/threads/{gate.thread_id}/messages", {"input": "x" * 101})
    by_page = page.post(f"/threads/{gate.thread_id}/messages/", {"input": "x" * 101}, follow=True)
    start_page = page.post("/threads/", {"agent": "refunds", "input": "x" * 101})

    assert (start.status_code, by_api.status_code) == (400, 400)
    assert (
        start.json()["errors"] == by_api.json()["errors"] == {"input": "is 101 characters; the limit is 100"}
    )
    assert "the limit is 100" in by_page.content.decode()
    assert start_page.status_code == 400 and "the limit is 100" in start_page.content.decode()
    assert everything() == before


# --- Fuzzing the API from its OpenAPI document ----------------------------------------------


def hostile_text(*, in_url: bool) -> Any:
    """Strings as an attacker writes them: NUL, a lone surrogate (in JSON only: a URL cannot
    carry one as UTF-8), over-long values, and otherwise any text."""
    from hypothesis import strategies as st

    special = ["a\x00b", "\x00", "../" * 40, "%00", "é" * 300]
    if in_url:
        special += ["x" * 2_000]  # uvicorn refuses a ~100 KB request line itself (400)
    else:
        special += ["x" * 20_001, "x \ud800", "\udc00", "\ud800\x00"]
    return st.one_of(st.sampled_from(special), st.text(max_size=50))


def with_hostile_strings(schema: Any, *, in_url: bool = False) -> Any:
    """The OpenAPI document with every plain string (parameter or body field) given a format
    that draws from hostile_text, so schemathesis sends such strings everywhere."""
    if isinstance(schema, list):
        return [with_hostile_strings(item, in_url=in_url) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("in") in ("path", "query"):
        in_url = True
    out = {k: with_hostile_strings(v, in_url=in_url) for k, v in schema.items()}
    if out.get("type") == "string" and "format" not in out and "enum" not in out:
        out["format"] = "gh-hostile-url" if in_url else "gh-hostile-json"
        out.pop("maxLength", None)  # over-long values must be generated too
    return out


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_fuzzing_every_api_operation_from_the_openapi_document_gives_no_5xx(
    live_server_url: str, live_services: LiveServices
) -> None:
    import hypothesis
    import schemathesis
    from schemathesis.core.result import Ok

    web_log = live_services.logs[live_services.processes[0].pid]  # the web server, started first
    log_start = web_log.stat().st_size
    token = do_create_token(user=make_user("ada", "admin"))
    gate = make_gate()
    raw = httpx.get(
        f"{live_server_url}/api/openapi.json", headers={"Authorization": f"Bearer {token}"}
    ).json()
    schemathesis.openapi.format("gh-hostile-url", hostile_text(in_url=True))
    schemathesis.openapi.format("gh-hostile-json", hostile_text(in_url=False))
    schema = schemathesis.openapi.from_dict(with_hostile_strings(raw))
    schema.config.base_url = live_server_url  # the document's paths start with /api
    failures: list[Any] = []
    calls: list[str] = []
    hostile: list[str] = []  # cases carrying a NUL, a lone surrogate or an over-long string
    settings = hypothesis.settings(
        max_examples=25,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
    )
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operation = result.ok()

        @settings
        @hypothesis.given(case=operation.as_strategy())
        def fuzz(case: Any) -> None:
            if case.path_parameters and len(calls) % 2:  # every other case on real rows
                real = {"thread_id": gate.thread_id, "approval_id": gate.pk}
                case.path_parameters.update({k: v for k, v in real.items() if k in case.path_parameters})
            response = case.call(headers={"Authorization": f"Bearer {token}"}, timeout=10)
            if response.status_code >= 500:
                failures.append((case.method, case.formatted_path, response.status_code, response.text[:200]))
            calls.append(case.method)
            sent = json.dumps([case.path_parameters, case.query, case.body], default=str)
            if any(mark in sent for mark in ("\\u0000", "\\ud8", "\\udc", "x" * 2_000)):
                hostile.append(case.method)

        fuzz()
    operations = len(list(schema.get_all_operations()))
    assert operations >= 15 and len(calls) >= operations * 5
    assert len(hostile) >= operations
    with web_log.open(errors="replace") as log:
        log.seek(log_start)
        assert "Traceback" not in log.read()  # no request ended in an exception, even one answered
    assert failures == []
