"""The LangGraph server API refuses searches it cannot bound with a 422, and answers a user about
a thread they may not see exactly as about a missing one (no agent name, no 409)."""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from approvals.actions.tokens import do_create_token
from approvals.api.threads import MAX_OFFSET
from tests.factories import make_gate, make_user

MAX_SEARCH_LIMIT = 100  # a page of at most 100 threads (LangGraph's SDK asks for 10)

pytestmark = pytest.mark.django_db


def langgraph(user: User) -> Client:
    return Client(headers={"x-api-key": do_create_token(user=user)}, raise_request_exception=False)


def post(client: Client, path: str, body: dict[str, Any]) -> Any:
    return client.post(f"/langgraph/{path}", json.dumps(body), content_type="application/json")


@pytest.mark.parametrize("path", ["threads/search", "assistants/search"])
@pytest.mark.parametrize(
    "body",
    [
        {"offset": -1},
        {"offset": MAX_OFFSET + 1},
        {"offset": 10**19},
        {"limit": 0},
        {"limit": -1},
        {"limit": MAX_SEARCH_LIMIT + 1},
        {"limit": 1_000_000},
        {"limit": 10**30},
    ],
)
def test_a_search_with_a_limit_or_offset_out_of_bounds_is_a_422(path: str, body: dict[str, Any]) -> None:
    make_gate()

    answer = post(langgraph(make_user("olga", "operator")), path, body)

    assert answer.status_code == 422
    assert answer.json()["detail"].startswith("The request is not valid:")


def test_a_search_within_bounds_still_answers_as_langgraphs_client_asks() -> None:
    olga = langgraph(make_user("olga", "operator"))

    for body in [{}, {"limit": 10, "offset": 0}, {"limit": MAX_SEARCH_LIMIT, "offset": MAX_OFFSET}]:
        assert post(olga, "threads/search", body).status_code == 200
        assert post(olga, "assistants/search", body).status_code == 200


def test_a_thread_the_user_may_not_see_is_not_found_as_a_missing_one_without_its_agent() -> None:
    hidden = make_gate()
    nobody = langgraph(make_user("nobody"))

    answer = nobody.get(f"/langgraph/threads/{hidden.thread_id}")
    missing = nobody.get("/langgraph/threads/no-such-thread")

    assert (answer.status_code, answer.json()) == (404, {"detail": "Thread not found."})
    assert (missing.status_code, missing.json()) == (404, {"detail": "Thread not found."})


@pytest.mark.parametrize("if_exists", ["raise", "do_nothing"])
def test_creating_a_thread_with_an_id_the_user_may_not_see_answers_as_for_a_free_id(if_exists: str) -> None:
    hidden = make_gate()
    nobody = langgraph(make_user("nobody"))

    taken = post(nobody, "threads", {"thread_id": hidden.thread_id, "if_exists": if_exists})
    free = post(nobody, "threads", {"thread_id": "no-such-thread", "if_exists": if_exists})

    assert (taken.status_code, free.status_code) == (200, 200)
    assert taken.json() == free.json() | {"thread_id": hidden.thread_id}  # no agent, no state


def test_creating_a_thread_with_a_taken_id_the_user_sees_is_still_a_409() -> None:
    gate = make_gate()

    for user in (make_user("olga", "operator"), make_user("rita", "reviewer")):
        answer = post(langgraph(user), "threads", {"thread_id": gate.thread_id})

        assert (answer.status_code, answer.json()) == (
            409,
            {"detail": f"Thread {gate.thread_id} already exists."},
        )


ASK = {"messages": [{"role": "user", "content": "Refund ORD-1001"}]}


@pytest.mark.parametrize("reviewer", [False, True], ids=["no role", "another queue's reviewer"])
@pytest.mark.parametrize("run", ["runs", "runs/wait", "runs/stream"])
@pytest.mark.parametrize(
    "body",
    [
        {"input": ASK},
        {"command": {"resume": {"decisions": [{"type": "approve"}]}}},
        {"input": ASK, "checkpoint_id": "1"},
    ],
    ids=["message", "resume", "from a checkpoint"],
)
def test_a_run_on_a_thread_the_user_may_not_see_answers_as_on_a_missing_one(
    reviewer: bool, run: str, body: dict[str, Any]
) -> None:
    hidden = make_gate()
    make_user("rita", "reviewer", queues=("refunds",))  # the refunds queue is now rita's team's
    user = make_user("sam", "reviewer", queues=("outreach",)) if reviewer else make_user("nobody")
    client, body = langgraph(user), {"assistant_id": "refunds_langgraph", **body}

    taken = post(client, f"threads/{hidden.thread_id}/{run}", body)
    free = post(client, f"threads/no-such-thread/{run}", body)

    assert (taken.status_code, taken.json()) == (free.status_code, free.json())
    assert taken.status_code in (403, 404, 422)
    hidden.refresh_from_db()
    assert hidden.status == "pending"


def test_the_openapi_document_needs_a_token_as_every_operation_does() -> None:
    anonymous = Client(headers={"Origin": "https://evil.example"}).get("/langgraph/openapi.json")
    paths = langgraph(make_user("rita", "reviewer")).get("/langgraph/openapi.json").json()["paths"]

    assert (anonymous.status_code, anonymous.json()) == (
        401,
        {"detail": "Send a valid API token: 'x-api-key: <token>'."},
    )
    assert {"/langgraph/threads", "/langgraph/threads/{thread_id}/runs"} <= set(paths)
