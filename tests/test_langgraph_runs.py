"""Runs of the LangGraph server API are records: each run a client starts is stored with its
metadata and read back by id (an id never started is a 404), listed newest first, and an earlier
run reports how it ended. Run options this server does not carry out are refused, not ignored;
and a thread whose decision waits out its undo window is searched as the status it shows.
Driven by LangGraph's own client against live uvicorn, a real worker and the offline model."""

import uuid
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from approvals.actions.undo import do_undo
from approvals.models import ApprovalRequest, LangGraphRun
from checkpoints.models import Thread
from tests.langgraph_clients import client_fixture, slow_undo_client_fixture  # noqa: F401
from tests.test_langgraph_sdk_compat import APPROVE, ASK
from tests.test_langgraph_server_api import AGENT, ask_refund

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_is_read_back_by_its_id_and_an_id_never_started_is_a_404(client: Any) -> None:
    thread_id = ask_refund(client)
    other_run = client.runs.create("other-thread", AGENT, input=ASK)
    client.runs.join("other-thread", other_run["run_id"])

    run = client.runs.create(thread_id, AGENT, command=APPROVE, metadata={"ticket": "T-42"})
    assert (run["status"], run["metadata"]) == ("pending", {"ticket": "T-42"})
    assert run["created_at"] and run["updated_at"]

    values = client.runs.join(thread_id, run["run_id"])
    assert "Refund of $42.50 issued" in values["messages"][-1]["content"]
    got = client.runs.get(thread_id, run["run_id"])
    assert (got["run_id"], got["status"], got["metadata"]) == (run["run_id"], "success", {"ticket": "T-42"})
    for unknown in (str(uuid.uuid4()), "not-a-run-id", other_run["run_id"]):
        with pytest.raises(NotFoundError) as missing:
            client.runs.get(thread_id, unknown)
        assert missing.value.response.json() == {"detail": "Run not found."}
        with pytest.raises(httpx.HTTPStatusError) as not_joined:  # the client's join raises httpx's
            client.runs.join(thread_id, unknown)
        assert not_joined.value.response.status_code == 404

    streamed = list(client.runs.stream("other-thread", AGENT, command=APPROVE))
    assert streamed[0].event == "metadata"
    assert streamed[0].data["run_id"] == client.runs.list("other-thread")[0]["run_id"]  # the stored run


def test_a_threads_runs_are_listed_newest_first_each_earlier_one_as_it_ended(client: Any) -> None:
    thread_id = ask_refund(client)
    resumed = client.runs.create(thread_id, AGENT, command=APPROVE)
    client.runs.join(thread_id, resumed["run_id"])
    again = client.runs.wait(
        thread_id, AGENT, input={"messages": [{"role": "user", "content": "Please refund order ORD-1002"}]}
    )
    assert again["messages"][-1]["tool_calls"][0]["name"] == "issue_refund"

    runs = client.runs.list(thread_id)

    assert [r["status"] for r in runs] == ["interrupted", "success", "interrupted"]
    assert runs[1]["run_id"] == resumed["run_id"]
    assert [r["created_at"] for r in runs] == sorted((r["created_at"] for r in runs), reverse=True)
    assert [r["run_id"] for r in client.runs.list(thread_id, limit=1, offset=1)] == [resumed["run_id"]]
    assert [r["run_id"] for r in client.runs.list(thread_id, status="success")] == [resumed["run_id"]]
    interrupted = client.runs.list(thread_id, status="interrupted")
    assert [r["run_id"] for r in interrupted] == [runs[0]["run_id"], runs[2]["run_id"]]
    assert client.runs.list(thread_id, status="error") == []
    with pytest.raises(UnprocessableEntityError, match="status"):
        client.runs.list(thread_id, status="bogus")
    with pytest.raises(UnprocessableEntityError, match="select"):
        client.runs.list(thread_id, select=["run_id"])
    with pytest.raises(UnprocessableEntityError):
        client.runs.list(thread_id, limit=0)
    with pytest.raises(NotFoundError):
        client.runs.list("no-such-thread")

    Thread.objects.get(pk=thread_id).delete()  # as an admin deletes a thread: its runs go with it
    assert not LangGraphRun.objects.filter(thread_id=thread_id).exists()


def test_a_strategy_or_config_this_server_does_not_carry_out_is_refused_and_starts_nothing(
    client: Any,
) -> None:
    refused: list[tuple[dict[str, Any], str]] = [
        ({"multitask_strategy": "interrupt"}, "multitask_strategy"),
        ({"multitask_strategy": "rollback"}, "multitask_strategy"),
        ({"multitask_strategy": "enqueue"}, "multitask_strategy"),
        ({"config": {"recursion_limit": 3}}, "config.recursion_limit"),
        ({"config": {"tags": ["nightly"]}}, "config.tags"),
        ({"config": {"configurable": {"model": "gpt-5"}}}, "config.configurable.model"),
        ({"config": {"configurable": {"thread_id": "another"}}}, "config.configurable.thread_id"),
        ({"config": {"configurable": {"checkpoint_ns": "sub:1"}}}, "config.configurable.checkpoint_ns"),
        ({"config": {"configurable": {"checkpoint_id": "not-the-head"}}}, "checkpoint"),
        ({"config": {"configurable": "x"}}, "config.configurable"),
        ({"context": {"user": "x"}}, "context"),
    ]
    for options, named in refused:
        with pytest.raises(UnprocessableEntityError, match=named):
            client.runs.create("with-options", AGENT, input=ASK, **options)
    assert not Thread.objects.exists() and not LangGraphRun.objects.exists()

    # What LangGraph's clients send on their normal path: nothing, an empty config, the ids.
    run = client.runs.create(
        "with-ids",
        AGENT,
        input=ASK,
        multitask_strategy="reject",
        config={"configurable": {"thread_id": "with-ids", "checkpoint_ns": ""}, "tags": []},
        context={},
        metadata={"source": "nightly", "attempt": 2},
    )
    assert (run["multitask_strategy"], run["metadata"]) == ("reject", {"source": "nightly", "attempt": 2})
    client.runs.join("with-ids", run["run_id"])
    head = client.threads.get_state("with-ids")["checkpoint"]["checkpoint_id"]  # LangGraph's id
    resumed = client.runs.wait(
        "with-ids", AGENT, command=APPROVE, config={"configurable": {"checkpoint_id": head}}
    )
    assert "Refund of $42.50 issued" in resumed["messages"][-1]["content"]
    stored = LangGraphRun.objects.filter(thread_id="with-ids").values_list("metadata", "outcome")
    assert list(stored) == [({}, ""), ({"source": "nightly", "attempt": 2}, "interrupted")]


def test_a_thread_deciding_in_its_undo_window_is_searched_as_busy_as_it_is_shown(
    slow_undo_client: Any,
) -> None:
    client = slow_undo_client
    thread_id = ask_refund(client)
    run = client.runs.create(thread_id, AGENT, command=APPROVE)

    assert client.threads.get(thread_id)["status"] == "busy"
    assert [t["thread_id"] for t in client.threads.search(status="busy")] == [thread_id]
    assert client.threads.search(status="interrupted") == []
    assert client.runs.get(thread_id, run["run_id"])["status"] == "pending"
    # "reject", the strategy served: another run on the busy thread is a 409, and stores no run.
    with pytest.raises(ConflictError):
        client.runs.create(thread_id, AGENT, command=APPROVE, multitask_strategy="reject")
    with pytest.raises(ConflictError):
        client.runs.create(thread_id, AGENT, input=ASK)
    assert len(client.runs.list(thread_id)) == 2

    request_ = ApprovalRequest.objects.get(thread_id=thread_id)
    assert request_.decided_by is not None
    do_undo(request_.pk, user=request_.decided_by)  # the reviewer takes the decision back

    assert client.threads.get(thread_id)["status"] == "interrupted"
    assert [t["thread_id"] for t in client.threads.search(status="interrupted")] == [thread_id]
    assert client.threads.search(status="busy") == []
    assert client.runs.get(thread_id, run["run_id"])["status"] == "interrupted"
