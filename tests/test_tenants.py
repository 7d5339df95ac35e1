"""A thread's tenant (its cross-thread store namespace) is set at start, by the API and the
Threads page, validated like thread ids, and shown; without one, the agent's memory is shared."""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from agents.tools import ToolContext
from checkpoints.models import Thread
from tests.factories import make_user

pytestmark = pytest.mark.django_db

BAD_TENANTS = ["a/b", "x" * 101, " ", "", "abc\n", "-dash-first", "a b", "é", "a%2Fb", 5, ["org:acme"]]


@pytest.fixture
def operator() -> User:
    return make_user("olga", "operator")


def api_client(user: User) -> Client:
    from approvals.actions.tokens import do_create_token

    return Client(headers={"Authorization": f"Bearer {do_create_token(user=user)}"})


def start(client: Client, **fields: Any) -> Any:
    body = {"agent": "refunds", "input": "Please refund order ORD-1001", **fields}
    return client.post("/api/threads", json.dumps(body), content_type="application/json")


def tool_store(thread_id: str) -> Any:
    """The store a tool of this thread reaches (ctx.store)."""
    head = str(Thread.objects.get(pk=thread_id).head_id)
    return ToolContext(thread_id=thread_id, checkpoint_id=head, tool_call_id="call_1").store


def test_threads_started_with_different_tenants_do_not_see_each_others_store_items(operator: User) -> None:
    client = api_client(operator)
    acme = start(client, thread_id="t-acme", tenant="org:acme")
    other = start(client, thread_id="t-other", tenant="org:other")
    assert (acme.status_code, other.status_code) == (201, 201), (acme.content, other.content)
    assert (acme.json()["tenant"], other.json()["tenant"]) == ("org:acme", "org:other")

    tool_store("t-acme").put(("customers",), "ORD-1001", {"refunded_cents": 4250})

    assert tool_store("t-acme").get(("customers",), "ORD-1001").value == {"refunded_cents": 4250}
    assert tool_store("t-other").get(("customers",), "ORD-1001") is None
    assert tool_store("t-other").search(("customers",)) == []
    assert client.get("/api/threads/t-acme").json()["tenant"] == "org:acme"


def test_without_a_tenant_threads_share_their_agents_memory_as_before(operator: User) -> None:
    client = api_client(operator)
    assert start(client, thread_id="t-one").json()["tenant"] == "agent:refunds"
    assert start(client, thread_id="t-two", tenant=None).status_code == 201
    tool_store("t-one").put(("customers",), "ORD-1001", {"refunded_cents": 1})
    assert tool_store("t-two").get(("customers",), "ORD-1001") is not None
    assert "tenant" not in Thread.objects.get(pk="t-one").metadata


@pytest.mark.parametrize("bad", BAD_TENANTS)
def test_a_bad_tenant_is_a_400_by_the_api_and_starts_nothing(operator: User, bad: Any) -> None:
    response = start(api_client(operator), tenant=bad)
    assert response.status_code == 400, response.content
    if isinstance(bad, str):
        assert "tenant" in response.json()["detail"] and "letters, digits" in response.json()["detail"]
    assert not Thread.objects.exists()


def test_the_start_form_sets_the_tenant_and_the_thread_page_shows_it(operator: User) -> None:
    client = Client()
    client.force_login(operator)
    page = client.get("/threads/").content.decode()
    assert 'name="tenant"' in page

    refused = client.post("/threads/", {"agent": "refunds", "input": "hi", "tenant": "a/b"})
    assert refused.status_code == 400
    assert "Tenant: use 1-100 letters" in refused.content.decode()
    assert not Thread.objects.exists()

    response = client.post("/threads/", {"agent": "refunds", "input": "hi", "tenant": "org:acme"})
    assert response.status_code == 302
    thread = Thread.objects.get()
    assert thread.metadata["tenant"] == "org:acme"
    assert "tenant org:acme" in client.get(response["Location"]).content.decode()

    response = client.post("/threads/", {"agent": "refunds", "input": "hi", "tenant": ""})
    assert response.status_code == 302
    assert "tenant agent:refunds" in client.get(response["Location"]).content.decode()
