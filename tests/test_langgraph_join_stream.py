"""runs.join_stream of the LangGraph server API (GET /threads/{id}/runs/{run}/stream): a run's
events from the join on, as runs.stream sends them, until the run stops; what a join cannot be
asked is a 422 naming it. Driven by langgraph-sdk's own client against live uvicorn, a real
worker and the offline model."""

import asyncio
from typing import Any

import pytest
from langgraph_sdk.errors import NotFoundError

from agents.offline.rules import ASK_ORDER
from approvals.api.langgraph_stream import run_events
from tests.langgraph_clients import client_fixture  # noqa: F401
from tests.test_langgraph_run_options import refusal, world
from tests.test_langgraph_sdk_compat import APPROVE, ASK
from tests.test_langgraph_server_api import AGENT

pytestmark = pytest.mark.django_db(transaction=True)

HELLO: dict[str, Any] = {"messages": [{"role": "user", "content": "Hello"}]}


def test_join_stream_streams_a_background_run_until_it_stops(client: Any) -> None:
    run = client.runs.create("joined", AGENT, input=ASK)

    parts = list(client.runs.join_stream("joined", run["run_id"]))

    assert parts[0].event == "metadata" and parts[0].data["run_id"] == run["run_id"]
    assert {p.event for p in parts[1:]} == {"values"}  # the run's own mode ("values") when none is named
    last = parts[-1].data
    assert last["messages"][-1]["tool_calls"][0]["name"] == "issue_refund"
    assert "__interrupt__" in last  # it stopped at the gate, as a values stream's last chunk says

    resumed = client.runs.create("joined", AGENT, command=APPROVE)
    updates = list(client.runs.join_stream("joined", resumed["run_id"], stream_mode=["updates", "values"]))

    assert updates[-1].event == "values"
    assert "Refund of $42.50 issued" in updates[-1].data["messages"][-1]["content"]
    assert client.runs.get("joined", resumed["run_id"])["status"] == "success"
    # The first run was followed by the resume: it has ended, and its stream is its metadata alone.
    assert [p.event for p in client.runs.join_stream("joined", run["run_id"])] == ["metadata"]


def test_join_stream_of_a_stateless_run_kept_streams_its_values(client: Any) -> None:
    run = client.runs.create(None, AGENT, input=HELLO, on_completion="keep")

    parts = list(client.runs.join_stream(run["thread_id"], run["run_id"], stream_mode="values"))

    assert parts[-1].event == "values" and parts[-1].data["messages"][-1]["content"] == ASK_ORDER


def test_what_a_join_stream_cannot_be_asked_is_refused_and_an_unknown_run_is_a_404(client: Any) -> None:
    run = client.runs.create("refused-joins", AGENT, input=ASK)
    client.runs.join("refused-joins", run["run_id"])
    before = world()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"cancel_on_disconnect": True}, "cancel_on_disconnect"),  # a dropped connection would end it
        ({"last_event_id": "7"}, "Last-Event-ID"),  # no stream is kept to replay
        ({"stream_mode": ["debug"]}, "stream_mode"),
    ]
    for options, naming in cases:
        response = refusal(
            lambda options=options: list(client.runs.join_stream("refused-joins", run["run_id"], **options))
        )
        assert response.status_code == 422 and naming in response.json()["detail"]
    assert world() == before

    for thread_id, run_id in (("refused-joins", "not-a-run"), ("no-such-thread", run["run_id"])):
        response = refusal(
            lambda thread_id=thread_id, run_id=run_id: list(client.runs.join_stream(thread_id, run_id))
        )
        assert response.status_code == 404
    with pytest.raises(NotFoundError):
        client.runs.get("no-such-thread", run["run_id"])


def test_a_stream_whose_thread_is_deleted_ends_as_its_run_did_only_where_the_deletion_is_its_end() -> None:
    """A background stateless run's thread is deleted as the run ends (by the worker), so a join
    that finds it gone has seen the run end; any other thread deleted under a stream is an error."""

    async def events(*, gone_ends: bool) -> list[bytes]:
        stream = run_events("deleted-meanwhile", "run-1", modes={"values"}, since="", gone_ends=gone_ends)
        return [event async for event in stream]

    [metadata] = asyncio.run(events(gone_ends=True))
    assert metadata.startswith(b"event: metadata\n")
    [_, error] = asyncio.run(events(gone_ends=False))
    assert error.startswith(b"event: error\n") and b"the thread was deleted" in error
