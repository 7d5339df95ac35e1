"""Bad input gets a clear 4xx and changes nothing: malformed JSON, wrong types, unknown fields,
oversized bodies and values, unknown agents, ids that do not exist. Then the whole API, fuzzed
from its OpenAPI document with schemathesis against the live server: never a 5xx."""

import json
from typing import Any

import pytest
from django.test import Client
from pytest_django.fixtures import Settings

from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, AuditEvent
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint, Thread
from tests.factories import make_gate, make_user

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
        ("post", "/api/approvals/not-a-number/decision", {"decision": "approve"}, 400),
        ("get", "/api/threads/no-such-thread", None, 404),
        ("get", f"/api/threads/{thread}/checkpoints/not-a-uuid", None, 404),
        ("get", f"/api/threads/{thread}/checkpoints/00000000-0000-0000-0000-000000000000", None, 404),
        ("get", f"/api/threads/{thread}/diff?from=nope", None, 404),
        ("get", "/api/threads?limit=abc", None, 400),
        ("get", "/api/approvals?status=everything", None, 400),
        ("patch", f"/api/threads/{thread}/state", {"values": {"messages": "not a list"}}, 400),
        ("patch", f"/api/threads/{thread}/state", {"values": {"messages": [{"x": "y" * 1_100_000}]}}, 413),
        ("patch", f"/api/threads/{thread}/state", {"values": []}, 400),
        ("post", f"/api/threads/{thread}/fork", {"checkpoint_id": "nope"}, 404),
        ("post", f"/api/threads/{thread}/messages", {"input": "   "}, 400),
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


def test_a_form_with_bad_state_json_or_an_oversized_body_changes_nothing() -> None:
    ada = make_user("ada", "admin")
    client = Client()
    client.force_login(ada)
    gate = make_gate()
    get_backend().set_status(thread_id=gate.thread_id, status="paused")  # type: ignore[arg-type]
    before = everything()

    bad_json = client.post(f"/threads/{gate.thread_id}/state/", {"values": "{oops"})
    too_big = client.post("/threads/", {"agent": "refunds", "input": "x" * 300_000})

    assert bad_json.status_code == 400
    assert too_big.status_code in (400, 413)
    assert everything() == before


# --- Fuzzing the API from its OpenAPI document ----------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_fuzzing_every_api_operation_from_the_openapi_document_gives_no_5xx(live_server_url: str) -> None:
    import hypothesis
    import schemathesis
    from schemathesis.core.result import Ok

    token = do_create_token(user=make_user("ada", "admin"))
    gate = make_gate()
    schema = schemathesis.openapi.from_url(f"{live_server_url}/api/openapi.json")
    schema.config.base_url = f"{live_server_url}/api"
    failures: list[Any] = []
    calls: list[str] = []
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

        fuzz()
    operations = len(list(schema.get_all_operations()))
    assert operations >= 15 and len(calls) >= operations * 5
    assert failures == []
