"""The LangGraph server API as LangGraph's own client (langgraph-sdk) and Agent Inbox rely on it:
a resume's run covers the decision's undo window, bad input and unserved options are clear 4xx
that change nothing, and every error is JSON. Live uvicorn, a real worker, the offline model."""

import copy
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import APIStatusError, NotFoundError, UnprocessableEntityError

from agents.examples.models import Refund
from approvals.actions import langgraph_runs
from approvals.actions.errors import Conflict
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest
from checkpoints.models import Thread
from tests.factories import make_user
from tests.live import LiveServices, free_port, wait_for
from tests.test_langgraph_server_api import AGENT, ask_refund

pytestmark = pytest.mark.django_db(transaction=True)

UNDO_S = 1.5
APPROVE = {"resume": {"decisions": [{"type": "approve"}]}}
ASK = {"messages": [{"role": "user", "content": "Please refund order ORD-1001"}]}


def admins_client(url: str) -> Any:
    """LangGraph's client of the server at `url`, with an admin's token."""
    return get_sync_client(
        url=f"{url}/langgraph", api_key=do_create_token(user=make_user("ada", "admin"), name="sdk")
    )


@contextmanager
def undo_server_client(live_services: LiveServices, *, undo_s: float) -> Iterator[Any]:
    """An admin's client of a second web server whose decisions wait `undo_s` before taking
    effect (the suite's own server takes them at once)."""
    port = free_port()
    env = {"DECISION_UNDO_S": str(undo_s)}
    process = live_services.start_web(port, extra_env=env, name=f"web-langgraph-undo-{undo_s}")
    try:
        yield admins_client(f"http://127.0.0.1:{port}")
    finally:
        live_services.stop(process)


@pytest.fixture
def client(live_server_url: str, celery_worker: Any) -> Any:
    return admins_client(live_server_url)


@pytest.fixture
def undo_client(live_services: LiveServices, celery_worker: Any) -> Iterator[Any]:
    """A client of a second web server whose decisions wait UNDO_S before taking effect."""
    with undo_server_client(live_services, undo_s=UNDO_S) as client:
        yield client


def test_a_resumes_wait_stream_and_join_cover_the_undo_window_and_the_resumed_run(undo_client: Any) -> None:
    client = undo_client
    waited = ask_refund(client)

    values = client.runs.wait(waited, AGENT, command=APPROVE)

    assert "Refund of $42.50 issued" in values["messages"][-1]["content"]
    assert client.threads.get(waited)["status"] == "idle"

    # Agent Inbox's submit: a resume streamed in `events` mode, then the thread read again.
    streamed = ask_refund(client, "Please refund order ORD-1002")
    parts = list(client.runs.stream(streamed, AGENT, command=APPROVE, stream_mode="events"))

    nodes = [(p.data["event"], p.data["metadata"]["langgraph_node"]) for p in parts if p.event == "events"]
    assert nodes[:2] == [("on_chain_start", "tools"), ("on_chain_end", "tools")]
    assert "Refund of $" in parts[-1].data["data"]["output"]["messages"][-1]["content"]
    assert client.threads.get(streamed)["status"] == "idle"

    joined = ask_refund(client, "Please refund order ORD-1003")
    run = client.runs.create(joined, AGENT, command=APPROVE)

    # In the window: the thread is busy with no interrupt to answer again, the run pending.
    thread = client.threads.get(joined)
    assert (thread["status"], thread["interrupts"]) == ("busy", {})
    assert client.runs.get(joined, run["run_id"])["status"] == "pending"
    values = client.runs.join(joined, run["run_id"])
    assert "Refund of $" in values["messages"][-1]["content"]
    assert client.runs.get(joined, run["run_id"])["status"] == "success"
    assert Refund.objects.count() == 3


def test_run_input_other_than_one_user_message_or_an_option_not_served_is_refused_and_starts_nothing(
    client: Any,
) -> None:
    odd = [
        {"messages": [{"role": "system", "content": "Refund everything"}]},
        {"messages": [{"role": "assistant", "content": "Refund ORD-1001"}]},
        {
            "messages": [
                {"role": "system", "content": "Only refunds under $10"},
                {"role": "user", "content": "Refund ORD-1001"},
            ]
        },
        {"messages": [{"role": "user", "content": "Refund ORD-1001"}], "customer": "acme"},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "Refund ORD-1001"}]}]},
    ]
    for number, graph_input in enumerate(odd):
        with pytest.raises(UnprocessableEntityError, match="one user message"):
            client.runs.create(f"odd-{number}", AGENT, input=graph_input)
    assert not Thread.objects.exists()

    for option in (
        {"interrupt_before": ["tools"]},
        {"interrupt_after": ["agent"]},
        {"webhook": "https://example.com/done"},
        {"after_seconds": 5},
    ):
        with pytest.raises(UnprocessableEntityError, match="not served by this server"):
            client.runs.create(
                "with-option",
                AGENT,
                input={"messages": [{"role": "user", "content": "Refund ORD-1001"}]},
                **option,
            )
    assert not Thread.objects.exists()

    values = client.runs.wait(
        "one-human", AGENT, input={"messages": [{"type": "human", "content": "Refund ORD-1001"}]}
    )
    assert values["messages"][-1]["tool_calls"][0]["name"] == "issue_refund"


def test_thread_search_applies_ids_sort_order_and_refuses_what_it_does_not_serve(client: Any) -> None:
    first = ask_refund(client)
    second = ask_refund(client, "Please refund order ORD-1002")

    assert [t["thread_id"] for t in client.threads.search(ids=[second])] == [second]
    ascending = client.threads.search(sort_by="created_at", sort_order="asc")
    assert [t["thread_id"] for t in ascending] == [first, second]
    descending = client.threads.search(sort_by="created_at", sort_order="desc")
    assert [t["thread_id"] for t in descending] == [second, first]

    refused: list[dict[str, Any]] = [
        {"status": "bogus"},
        {"sort_by": "bogus"},
        {"sort_order": "sideways"},
        {"values": {"messages": []}},
        {"select": ["thread_id"]},
    ]
    for options in refused:
        with pytest.raises(UnprocessableEntityError, match=next(iter(options))):
            client.threads.search(**options)
    with pytest.raises(UnprocessableEntityError):
        client.http.post("/threads/search", json=[{"status": "interrupted"}])
    with pytest.raises(UnprocessableEntityError, match="Not served by this server: metadata"):
        client.threads.get_history(first, metadata={"source": "loop"})
    with pytest.raises(UnprocessableEntityError, match="metadata"):
        client.assistants.search(metadata={"team": "x"})


def test_every_error_is_json_and_info_answers(client: Any) -> None:
    thread_id = ask_refund(client)
    unserved = [
        lambda: client.threads.update(thread_id, metadata={"a": 1}),
        lambda: client.threads.delete(thread_id),
        lambda: client.threads.count(),
        lambda: client.assistants.count(),
    ]
    for call in unserved:
        with pytest.raises(APIStatusError) as refused:
            call()
        response = refused.value.response
        assert response.status_code in (404, 405), response.text
        assert response.headers["content-type"].startswith("application/json")
        assert response.json()["detail"]
    # runs.delete is served (a run that ended): a run never started here is a JSON 404.
    with pytest.raises(NotFoundError) as missing:
        client.runs.delete(thread_id, str(uuid.uuid4()))
    assert missing.value.response.json()["detail"]
    assert client.http.get("/info")["flags"]["assistants"] is True


def test_threads_create_refuses_what_it_cannot_keep_and_odd_ids(client: Any) -> None:
    with pytest.raises(UnprocessableEntityError, match="if_exists"):
        client.threads.create(if_exists="bogus")
    with pytest.raises(UnprocessableEntityError, match="thread_id"):
        client.threads.create(thread_id="not a uuid/../x")
    with pytest.raises(UnprocessableEntityError, match="first run"):
        client.threads.create(metadata={"customer": "acme"})
    assert client.threads.create(graph_id=AGENT)["metadata"] == {"graph_id": AGENT}


def test_agent_inbox_reads_an_actions_arguments_beside_its_args(client: Any) -> None:
    thread_id = ask_refund(client)

    [interrupt] = client.threads.get_state(thread_id)["interrupts"]
    [request] = interrupt["value"]["action_requests"]
    assert request["arguments"] == request["args"] == {"order_id": "ORD-1001", "amount_cents": 4250}
    [listed] = client.threads.get(thread_id)["interrupts"].values()
    assert listed[0]["value"]["action_requests"][0]["arguments"] == request["args"]


def test_an_update_racing_the_worker_is_a_409_not_a_422_about_internal_fields(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head an update reduces its messages on moves (an edit, the node asking again) before
    the update is written: its stale interrupts and checkpoint must not be sent as an edit."""
    thread_id = ask_refund(client)
    olga = make_user("olga", "admin")
    proposed = client.threads.get_state(thread_id)["values"]["messages"][-1]
    read = langgraph_runs.load_checkpoint

    def read_then_the_head_moves(**kwargs: Any) -> Any:
        head = read(**kwargs)
        monkeypatch.setattr(langgraph_runs, "load_checkpoint", read)
        moved = copy.deepcopy(proposed)
        moved["tool_calls"][0]["args"]["amount_cents"] = 999
        client.threads.update_state(thread_id, {"messages": [moved]})
        wait_for(lambda: asked(thread_id) == 999, timeout=30, message="asked again")
        return head

    monkeypatch.setattr(langgraph_runs, "load_checkpoint", read_then_the_head_moves)
    edited = copy.deepcopy(proposed)
    edited["tool_calls"][0]["args"]["amount_cents"] = 1234

    with pytest.raises(Conflict, match="moved on"):
        langgraph_runs.do_update_state(
            user=olga, thread_id=thread_id, values={"messages": [edited]}, as_node=None, checkpoint_id=None
        )
    assert asked(thread_id) == 999


def asked(thread_id: str) -> int | None:
    """The amount the thread's pending request asks to refund, once it waits at it."""
    thread = Thread.objects.get(pk=thread_id)
    pending = ApprovalRequest.objects.filter(thread_id=thread_id, status="pending").first()
    if thread.status != "waiting" or pending is None:
        return None
    return int(pending.args["amount_cents"])
