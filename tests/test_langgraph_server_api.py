"""The LangGraph server API at /langgraph, driven by LangGraph's own client (langgraph-sdk), as a
LangGraph user or Agent Inbox would: against live uvicorn, a real worker and the offline model."""

import time
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import (
    AuthenticationError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    UnprocessableEntityError,
)

from agents.examples.models import Refund
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, AuditEvent
from checkpoints.models import LangGraphCheckpoint, Thread
from tests.factories import Api, api_for, make_user
from tests.live import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = "refunds_langgraph"


@pytest.fixture
def client(live_server_url: str, celery_worker: Any) -> Any:
    ada = make_user("ada", "admin")
    return get_sync_client(url=f"{live_server_url}/langgraph", api_key=do_create_token(user=ada, name="sdk"))


def ask_refund(client: Any, text: str = "Please refund order ORD-1001") -> str:
    thread = client.threads.create()
    state = client.runs.wait(
        thread["thread_id"], AGENT, input={"messages": [{"role": "user", "content": text}]}
    )
    assert state["messages"][-1]["tool_calls"][0]["name"] == "issue_refund"
    return str(thread["thread_id"])


def test_a_graph_is_an_assistant_and_its_interrupt_a_pending_request(client: Any) -> None:
    [assistant] = client.assistants.search(graph_id=AGENT)
    assert (assistant["assistant_id"], assistant["graph_id"]) == (AGENT, AGENT)
    assert client.assistants.get(AGENT)["name"] == AGENT

    thread_id = ask_refund(client)

    thread = client.threads.get(thread_id)
    assert thread["status"] == "interrupted"
    [interrupted] = client.threads.search(status="interrupted", metadata={"graph_id": AGENT})
    assert interrupted["thread_id"] == thread_id
    state = client.threads.get_state(thread_id)
    [task] = state["tasks"]
    [request] = task["interrupts"][0]["value"]["action_requests"]
    assert request["args"] == {"order_id": "ORD-1001", "amount_cents": 4250}
    assert ApprovalRequest.objects.get(thread_id=thread_id).status == "pending"  # it is in the inbox


def test_a_resume_through_the_client_is_a_decision_in_the_ledger(client: Any) -> None:
    thread_id = ask_refund(client)

    run = client.runs.create(thread_id, AGENT, command={"resume": {"decisions": [{"type": "approve"}]}})
    values = client.runs.join(thread_id, run["run_id"])

    assert "Refund of $42.50 issued for order ORD-1001" in values["messages"][-1]["content"]
    assert client.threads.get(thread_id)["status"] == "idle"
    got = client.runs.get(thread_id, run["run_id"])
    assert (got["run_id"], got["thread_id"], got["status"]) == (run["run_id"], thread_id, "success")
    request = ApprovalRequest.objects.get(thread_id=thread_id)
    assert request.status == "approved" and request.decided_by is not None
    assert request.decided_by.get_username() == "ada"
    assert AuditEvent.objects.filter(action="decision.approve", thread_id=thread_id).count() == 1
    assert Refund.objects.count() == 1


def test_a_resume_with_an_odd_decision_or_none_is_refused_and_decides_nothing(client: Any) -> None:
    thread_id = ask_refund(client)
    odd = [
        {"decisions": [{"type": "edit", "edited_action": "x"}]},
        {"decisions": [{"type": "edit", "args": ["a"]}]},
        {"decisions": [{"type": "reject", "message": 5}]},
        {},
    ]
    for resume in odd:
        with pytest.raises(UnprocessableEntityError):
            client.runs.create(thread_id, AGENT, command={"resume": resume})
    assert ApprovalRequest.objects.get(thread_id=thread_id).status == "pending"


def test_a_resume_after_a_reviewer_decided_is_refused_409(client: Any, live_server_url: str) -> None:
    thread_id = ask_refund(client)
    rita = make_user("rita", "reviewer")
    reviewer: Api = api_for(rita, live_server_url)
    pending = ApprovalRequest.objects.get(thread_id=thread_id)
    assert (
        reviewer.post(
            f"/approvals/{pending.pk}/decision", {"decision": "reject", "message": "no"}
        ).status_code
        == 200
    )

    with pytest.raises(ConflictError):
        client.runs.create(thread_id, AGENT, command={"resume": {"decisions": [{"type": "approve"}]}})
    [asked] = client.runs.list(thread_id)  # the refused resume stored no run
    values = client.runs.join(thread_id, asked["run_id"])
    assert "no" in values["messages"][-1]["content"] and Refund.objects.count() == 0


def test_an_edit_through_the_client_runs_the_edited_action(client: Any) -> None:
    thread_id = ask_refund(client, "Please refund order ORD-1002")
    edit = {
        "type": "edit",
        "edited_action": {"name": "issue_refund", "args": {"order_id": "ORD-1002", "amount_cents": 700}},
    }

    values = client.runs.wait(thread_id, AGENT, command={"resume": {"decisions": [edit]}})

    assert "Refund of $7.00 issued" in values["messages"][-1]["content"]
    assert list(Refund.objects.values_list("amount_cents", flat=True)) == [700]


def test_unknown_things_and_bad_keys_get_the_servers_errors(client: Any, live_server_url: str) -> None:
    with pytest.raises(NotFoundError):
        client.assistants.get("refunds")  # a native agent is not a LangGraph assistant
    with pytest.raises(NotFoundError):
        client.threads.get("no-such-thread")
    anonymous = get_sync_client(url=f"{live_server_url}/langgraph", api_key="wrong")
    with pytest.raises(AuthenticationError):
        anonymous.assistants.search()


def test_odd_searches_and_runs_are_clear_4xx_not_500s(client: Any) -> None:
    with pytest.raises(UnprocessableEntityError):
        client.threads.search(metadata={"tenant__in": "x"})
    with pytest.raises(UnprocessableEntityError):
        client.runs.create(
            "x" * 101, AGENT, input={"messages": [{"role": "user", "content": "Refund ORD-1001"}]}
        )
    with pytest.raises(UnprocessableEntityError):
        client.runs.create("fresh-1", AGENT, input={"messages": []})
    with pytest.raises(NotFoundError):
        client.runs.create("fresh-2", AGENT, command={"resume": {"decisions": [{"type": "approve"}]}})
    with pytest.raises(UnprocessableEntityError, match="status"):  # not a search that finds nothing
        client.threads.search(status="no-such-status")


def test_a_run_streams_its_values_until_the_interrupt_and_a_streamed_resume_to_the_end(client: Any) -> None:
    thread_id = client.threads.create()["thread_id"]
    ask = {"messages": [{"role": "user", "content": "Please refund order ORD-1001"}]}

    parts = list(client.runs.stream(thread_id, AGENT, input=ask, stream_mode="values"))

    assert parts[0].event == "metadata" and parts[0].data["run_id"]
    values = [part.data for part in parts[1:]]
    assert values and {part.event for part in parts[1:]} == {"values"}
    assert values[-1]["messages"][-1]["tool_calls"][0]["name"] == "issue_refund"
    assert client.threads.get(thread_id)["status"] == "interrupted"

    resume = {"resume": {"decisions": [{"type": "approve"}]}}
    parts = list(client.runs.stream(thread_id, AGENT, command=resume, stream_mode="values"))

    assert "Refund of $42.50 issued" in parts[-1].data["messages"][-1]["content"]
    assert Refund.objects.count() == 1
    for unserved in ("messages", "debug", "custom"):  # the README's "not served yet"
        with pytest.raises(UnprocessableEntityError):
            list(client.runs.stream(thread_id, AGENT, input=ask, stream_mode=unserved))


def test_a_run_streams_each_nodes_update_and_the_interrupt_as_langgraph_does(client: Any) -> None:
    thread_id = client.threads.create()["thread_id"]
    ask = {"messages": [{"role": "user", "content": "Please refund order ORD-1001"}]}

    parts = list(client.runs.stream(thread_id, AGENT, input=ask, stream_mode="updates"))

    assert {part.event for part in parts[1:]} == {"updates"}
    assert [next(iter(part.data)) for part in parts[1:]] == ["model", "tools", "model", "__interrupt__"]
    lookup = parts[1].data["model"]["messages"][-1]
    assert (lookup["type"], lookup["tool_calls"][0]["name"]) == ("ai", "lookup_order")
    [asked] = parts[-1].data["__interrupt__"]
    assert asked["value"]["action_requests"][0]["args"] == {"order_id": "ORD-1001", "amount_cents": 4250}

    resume = {"resume": {"decisions": [{"type": "approve"}]}}
    parts = list(client.runs.stream(thread_id, AGENT, command=resume, stream_mode=["updates", "values"]))

    updates = [part.data for part in parts if part.event == "updates"]
    assert [next(iter(u)) for u in updates] == ["tools", "model"]  # the resumed node, then the answer
    assert "Refund of $42.50 issued" in updates[-1]["model"]["messages"][-1]["content"]
    assert (
        parts[-1].event == "values" and parts[-1].data["messages"][-1] == updates[-1]["model"]["messages"][-1]
    )


def test_a_run_streams_each_message_a_node_adds_with_its_node_as_messages_tuple(client: Any) -> None:
    thread_id = client.threads.create()["thread_id"]
    ask = {"messages": [{"role": "user", "content": "Please refund order ORD-1001"}]}

    parts = list(client.runs.stream(thread_id, AGENT, input=ask, stream_mode="messages-tuple"))

    assert {part.event for part in parts[1:]} == {"messages"}
    sent = [(meta["langgraph_node"], message["type"]) for message, meta in (part.data for part in parts[1:])]
    # Not the question (it was the input), nor the call the tools node returns again with its result.
    assert sent == [("model", "ai"), ("tools", "tool"), ("model", "ai")]
    [refund_call] = parts[-1].data[0]["tool_calls"]
    assert (refund_call["name"], parts[-1].data[1]["thread_id"]) == ("issue_refund", thread_id)
    steps = [part.data[1]["langgraph_step"] for part in parts[1:]]
    assert steps == sorted(steps) and len(set(steps)) == 3

    resume = {"resume": {"decisions": [{"type": "approve"}]}}
    parts = list(
        client.runs.stream(thread_id, AGENT, command=resume, stream_mode=["messages-tuple", "updates"])
    )

    events = [
        (part.event, next(iter(part.data)) if part.event == "updates" else part.data[1]["langgraph_node"])
        for part in parts[1:]
    ]
    assert events == [
        ("messages", "tools"),
        ("updates", "tools"),
        ("messages", "model"),
        ("updates", "model"),
    ]
    final = [part.data[0] for part in parts if part.event == "messages"][-1]
    assert "Refund of $42.50 issued" in final["content"]
    assert final == client.threads.get_state(thread_id)["values"]["messages"][-1]


def test_update_state_is_an_operators_edit_and_langgraph_asks_again_about_the_edited_call(
    client: Any, live_server_url: str
) -> None:
    thread_id = ask_refund(client)
    state = client.threads.get_state(thread_id)
    proposed = state["values"]["messages"][-1]
    [call] = proposed["tool_calls"]
    edited = {**proposed, "tool_calls": [{**call, "args": {**call["args"], "amount_cents": 1000}}]}
    rita = make_user("rita", "reviewer")
    reviewer = get_sync_client(
        url=f"{live_server_url}/langgraph", api_key=do_create_token(user=rita, name="r")
    )

    with pytest.raises(PermissionDeniedError):
        reviewer.threads.update_state(thread_id, {"messages": [edited]})
    with pytest.raises(UnprocessableEntityError):
        client.threads.update_state(thread_id, {"messages": [edited]}, as_node="model")
    with pytest.raises(UnprocessableEntityError):
        client.threads.update_state(thread_id, {"langgraph_checkpoint": "x"})
    with pytest.raises(UnprocessableEntityError):
        client.threads.update_state(thread_id, {"messages": [{"type": "remove", "id": "no-such-message"}]})
    with pytest.raises(UnprocessableEntityError):
        client.threads.update_state(thread_id, {"messages": [edited]}, checkpoint_id="an-earlier-one")
    for odd in ({"role": "assistant", "content": "", "tool_calls": "x"}, {"role": "tool", "content": "x"}):
        with pytest.raises(UnprocessableEntityError):
            client.threads.update_state(thread_id, {"messages": [odd]})
    assert client.threads.get_state(thread_id)["values"] == state["values"]  # nothing changed

    written = client.threads.update_state(thread_id, {"messages": [edited]})

    assert written["checkpoint"]["gatehouse_checkpoint"] != state["checkpoint"]["gatehouse_checkpoint"]
    assert AuditEvent.objects.filter(thread_id=thread_id, action="thread.update", actor_name="ada").exists()
    # Shown at once, whether or not the next step has written it to LangGraph's state yet.
    shown = client.threads.get_state(thread_id)["values"]["messages"][-1]
    assert (shown["id"], shown["tool_calls"][0]["args"]["amount_cents"]) == (proposed["id"], 1000)
    # The interrupted node runs again on the edited call (replaced by id, not appended) and asks anew.
    asked = wait_interrupted(client, thread_id, amount_cents=1000)
    assert len(asked["values"]["messages"]) == len(state["values"]["messages"])
    assert ApprovalRequest.objects.filter(thread_id=thread_id, status="superseded").count() == 1
    values = client.runs.wait(thread_id, AGENT, command={"resume": {"decisions": [{"type": "approve"}]}})
    assert "Refund of $10.00 issued for order ORD-1001" in values["messages"][-1]["content"]
    assert list(Refund.objects.values_list("amount_cents", flat=True)) == [1000]


def wait_interrupted(client: Any, thread_id: str, *, amount_cents: int) -> Any:
    """The thread's state once it is interrupted about a refund of amount_cents (30 s at most)."""
    deadline = time.monotonic() + 30
    while True:
        state = client.threads.get_state(thread_id)
        asked = [
            r["args"]["amount_cents"] for i in state["interrupts"] for r in i["value"]["action_requests"]
        ]
        if client.threads.get(thread_id)["status"] == "interrupted" and asked[:1] == [amount_cents]:
            return state
        assert time.monotonic() < deadline, state
        time.sleep(0.2)


def test_agent_inbox_submits_with_an_events_stream_and_resolves_a_thread_by_updating_it_as_the_end(
    client: Any, live_server_url: str
) -> None:
    thread_id = ask_refund(client)
    # Submit, as Agent Inbox sends it for LangChain's middleware: a resume streamed in `events` mode.
    resume = {"resume": {"decisions": [{"type": "approve", "args": None}]}}

    parts = list(client.runs.stream(thread_id, AGENT, command=resume, stream_mode="events"))

    events = [part.data for part in parts[1:]]
    assert {part.event for part in parts[1:]} == {"events"}
    shown = [(e["event"], e["metadata"]["langgraph_node"]) for e in events]  # what the inbox reads
    assert shown == [
        ("on_chain_start", "tools"),
        ("on_chain_end", "tools"),
        ("on_chain_start", "model"),
        ("on_chain_end", "model"),
    ]
    assert "Refund of $42.50 issued" in events[-1]["data"]["output"]["messages"][-1]["content"]
    assert client.threads.get(thread_id)["status"] == "idle"

    # "Mark as resolved": no values, as the graph's end. It ends the thread, as an operator's cancel.
    other = ask_refund(client)
    rita = make_user("rita", "reviewer")
    reviewer = get_sync_client(
        url=f"{live_server_url}/langgraph", api_key=do_create_token(user=rita, name="r")
    )
    with pytest.raises(PermissionDeniedError):
        reviewer.threads.update_state(other, None, as_node="__end__")
    assert client.threads.get(other)["status"] == "interrupted"

    client.threads.update_state(other, None, as_node="__end__")

    assert client.threads.get(other)["status"] == "idle"
    assert ApprovalRequest.objects.get(thread_id=other).status == "superseded"
    assert AuditEvent.objects.filter(thread_id=other, action="thread.cancel", actor_name="ada").exists()
    assert Refund.objects.count() == 1  # the first thread's


def test_a_run_that_fails_ends_its_stream_with_an_error_event_saying_why(client: Any) -> None:
    thread_id = ask_refund(client)
    # Someone alters LangGraph's checkpoint in the database: it no longer matches its digest.
    stored = LangGraphCheckpoint.objects.filter(thread_id=thread_id)
    latest = stored.order_by("-checkpoint_id").first()
    assert latest is not None
    stored.filter(checkpoint_id=latest.checkpoint_id).update(metadata={**latest.metadata, "forged": True})
    resume = {"resume": {"decisions": [{"type": "approve"}]}}

    parts = list(client.runs.stream(thread_id, AGENT, command=resume, stream_mode="values"))

    assert parts[-1].event == "error" and "failed its SHA-256 digest check" in parts[-1].data["message"]
    with pytest.raises(ConflictError, match="digest check"):  # a clear 409, not a 500
        client.threads.get_state(thread_id)
    wait_for(lambda: Thread.objects.get(pk=thread_id).status == "failed", timeout=20, message="failed")
    assert "digest check" in Thread.objects.get(pk=thread_id).error
    [listed] = client.threads.search(status="error")  # one such thread does not break the list
    assert (listed["thread_id"], listed["values"]) == (thread_id, {})
    assert Refund.objects.count() == 0


def test_a_run_from_an_earlier_checkpoint_is_refused_rather_than_run_from_the_latest(client: Any) -> None:
    thread_id = ask_refund(client)
    earliest = client.threads.get_history(thread_id, limit=50)[-1]["checkpoint"]
    resume = {"resume": {"decisions": [{"type": "approve"}]}}

    with pytest.raises(UnprocessableEntityError, match="latest state"):
        client.runs.create(thread_id, AGENT, command=resume, checkpoint=earliest)
    with pytest.raises(UnprocessableEntityError):
        client.runs.create(
            "fresh-3", AGENT, input={"messages": [{"role": "user", "content": "Hi"}]}, checkpoint_id="x"
        )
    assert ApprovalRequest.objects.get(thread_id=thread_id).status == "pending"  # nothing decided

    head = client.threads.get_state(thread_id)["checkpoint"]  # the latest, named: it goes on
    values = client.runs.wait(thread_id, AGENT, command=resume, checkpoint=head)
    assert "Refund of $42.50 issued" in values["messages"][-1]["content"]


def test_history_lists_the_threads_checkpoints_newest_first_and_pages_with_before(client: Any) -> None:
    thread_id = ask_refund(client)
    state = client.threads.get_state(thread_id)

    [newest] = client.threads.get_history(thread_id, limit=1)
    older = client.threads.get_history(thread_id, limit=10, before=newest["checkpoint"])

    assert newest["checkpoint"] == state["checkpoint"] and newest["tasks"] == state["tasks"]
    # One checkpoint per run segment: the input, then the segment that stopped at the interrupt.
    [first] = older
    assert first["metadata"]["step"] < newest["metadata"]["step"] and not first["tasks"]
    assert first["values"]["messages"][0]["content"] == "Please refund order ORD-1001"
    with pytest.raises(NotFoundError):
        client.threads.get_history(thread_id, before="no-such-checkpoint")
