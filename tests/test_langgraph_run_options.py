"""Every option LangGraph's client sends with a run is carried out as asked or refused with a 422
naming it (nothing started: no thread, no run, no task), and runs.cancel and runs.delete do what
they say or answer why not. Driven by langgraph-sdk's own client against live uvicorn, a real
worker and the offline model."""

import time
from typing import Any

import httpx
import pytest
from langgraph.graph import START, MessagesState, StateGraph
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError, PermissionDeniedError, UnprocessableEntityError

from agents.actions import InvalidInput
from agents.examples.models import Refund
from approvals.actions.tokens import do_create_token
from approvals.api.langgraph_options import RunIn, check_run_options
from approvals.models import ApprovalRequest, AuditEvent, LangGraphRun
from checkpoints.models import Checkpoint, Thread
from tests.factories import make_user
from tests.langgraph_clients import client_fixture, slow_undo_client_fixture  # noqa: F401
from tests.test_langgraph_sdk_compat import APPROVE, ASK, admins_client
from tests.test_langgraph_server_api import AGENT, ask_refund

pytestmark = pytest.mark.django_db(transaction=True)


def world() -> tuple[Any, ...]:
    """What a run could have changed: threads, runs, checkpoints, requests, the ledger. Not the
    workers' count of tasks taken: the session's worker also takes tasks earlier tests left
    behind (a busy retry's countdown), whenever they come due, which a refusal did not send."""
    requests = sorted(ApprovalRequest.objects.values_list("pk", "status"))
    threads = sorted(Thread.objects.values_list("pk", "status", "head_id"))
    runs = sorted(LangGraphRun.objects.values_list("pk", "outcome"))
    return threads, runs, Checkpoint.objects.count(), requests, AuditEvent.objects.count()


def refusal(call: Any) -> httpx.Response:
    """The answer to a call the server refuses (the client's wait and stream raise httpx's own
    error, its other calls the SDK's)."""
    with pytest.raises(httpx.HTTPStatusError) as answer:
        call()
    return answer.value.response


def quiet_world() -> tuple[Any, ...]:
    """The world once the workers are idle: an earlier run's task may still be being accepted
    (the workers' count is of tasks they took, whenever they took them)."""
    deadline, now = time.monotonic() + 10, world()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now, was = world(), now
        if now == was:
            break
    return now


def refused(call: Any, *, naming: str) -> None:
    """The call is a 422 that names the field and says nothing was done, and nothing was."""
    before = quiet_world()
    response = refusal(call)
    assert response.status_code == 422
    assert naming in response.json()["detail"] and "nothing was done" in response.json()["detail"].lower()
    assert world() == before


def last_message(values: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = values["messages"][-1]
    return message


def test_if_not_exists_create_starts_the_thread_with_the_runs_assistant(client: Any) -> None:
    values = client.runs.wait("created-here", AGENT, input=ASK, if_not_exists="create")

    assert last_message(values)["tool_calls"][0]["name"] == "issue_refund"
    assert Thread.objects.get(pk="created-here").agent == AGENT
    assert client.threads.get("created-here")["metadata"]["graph_id"] == AGENT
    refused(
        lambda: client.runs.create("other", AGENT, input=ASK, if_not_exists="sometimes"),
        naming="if_not_exists",
    )


def test_if_not_exists_reject_is_a_404_for_a_missing_thread_and_goes_on_on_an_existing_one(
    client: Any,
) -> None:
    before = quiet_world()
    for run in (client.runs.create, client.runs.wait, client.runs.stream):
        response = refusal(
            lambda run=run: list(run("never-started", AGENT, input=ASK, if_not_exists="reject"))
        )
        assert (response.status_code, response.json()) == (404, {"detail": "Thread not found."})
    assert world() == before

    thread_id = ask_refund(client)
    values = client.runs.wait(thread_id, AGENT, command=APPROVE, if_not_exists="reject")
    assert "Refund of $42.50 issued" in last_message(values)["content"]


def test_every_durability_is_served_by_checkpointing_each_step_before_the_next(client: Any) -> None:
    values = client.runs.wait("durable", AGENT, input=ASK, durability="exit")
    assert last_message(values)["tool_calls"][0]["name"] == "issue_refund"
    waiting = Checkpoint.objects.filter(thread_id="durable").count()
    assert waiting >= 2  # the input and the step that stopped at the gate, each kept

    with pytest.warns(DeprecationWarning, match="checkpoint_during"):  # the SDK's, still sent
        values = client.runs.wait(
            "durable", AGENT, command=APPROVE, durability="async", checkpoint_during=False
        )
    assert "Refund of $42.50 issued" in last_message(values)["content"]
    assert Checkpoint.objects.filter(thread_id="durable").count() > waiting
    with pytest.warns(DeprecationWarning, match="checkpoint_during"):
        client.runs.wait("durable-sync", AGENT, input=ASK, durability="sync", checkpoint_during=True)
    refused(lambda: client.runs.create("other", AGENT, input=ASK, durability="never"), naming="durability")


def test_stream_subgraphs_streams_what_it_would_without_on_a_graph_without_and_is_refused_on_one_with(
    client: Any,
) -> None:
    def events(thread_id: str, **options: Any) -> list[tuple[str, Any]]:
        parts = client.runs.stream(thread_id, AGENT, input=ASK, stream_mode="updates", **options)
        return [(p.event, list(p.data)) for p in parts if p.event != "metadata"]

    plain = events("plain")
    assert plain and plain == events("with-subgraphs", stream_subgraphs=True)

    # A graph that has subgraphs: they are not streamed, so it is refused.
    inner = StateGraph(MessagesState)
    inner.add_node("echo", lambda state: {"messages": []})
    inner.add_edge(START, "echo")
    outer = StateGraph(MessagesState)
    outer.add_node("inner", inner.compile())
    outer.add_edge(START, "inner")
    body = RunIn(assistant_id=AGENT, input=ASK, stream_subgraphs=True)

    with pytest.raises(InvalidInput) as refusal:
        check_run_options(body, graph=outer.compile())
    assert "nothing was done" in refusal.value.errors["stream_subgraphs"]
    check_run_options(body, graph=inner.compile())  # no subgraphs: nothing more to stream


def test_stream_resumable_is_refused_and_starts_nothing(client: Any) -> None:
    refused(
        lambda: list(client.runs.stream("resumable", AGENT, input=ASK, stream_resumable=True)),
        naming="stream_resumable",
    )
    refused(
        lambda: client.runs.create("resumable", AGENT, input=ASK, stream_resumable=True),
        naming="stream_resumable",
    )


def test_on_disconnect_continue_is_served_and_cancel_refused(client: Any) -> None:
    values = client.runs.wait("stays", AGENT, input=ASK, on_disconnect="continue")
    assert last_message(values)["tool_calls"][0]["name"] == "issue_refund"

    refused(
        lambda: client.runs.wait("leaves", AGENT, input=ASK, on_disconnect="cancel"), naming="on_disconnect"
    )
    refused(
        lambda: list(client.runs.stream("leaves", AGENT, input=ASK, on_disconnect="cancel")),
        naming="on_disconnect",
    )


def test_on_completion_keep_is_served_and_delete_refused(client: Any) -> None:
    run = client.runs.create("kept", AGENT, input=ASK, on_completion="keep")
    client.runs.join("kept", run["run_id"])
    assert client.threads.get("kept")["status"] == "interrupted"

    refused(
        lambda: client.runs.create("deleted", AGENT, input=ASK, on_completion="delete"),
        naming="on_completion",
    )


def test_feedback_keys_are_refused_and_start_nothing(client: Any) -> None:
    refused(
        lambda: list(client.runs.stream("feedback", AGENT, input=ASK, feedback_keys=["correctness"])),
        naming="feedback_keys",
    )


def test_langsmith_tracing_is_refused_and_starts_nothing(client: Any) -> None:
    tracing = {"project_name": "refunds"}
    refused(
        lambda: client.runs.create("traced", AGENT, input=ASK, langsmith_tracing=tracing),
        naming="langsmith_tracer",
    )


def test_an_unknown_field_is_refused_naming_it_and_what_the_client_sends_is_served(client: Any) -> None:
    refused(
        lambda: client.http.post(
            "/threads/odd/runs", json={"assistant_id": AGENT, "input": ASK, "priority": "high"}
        ),
        naming="Not served by this server: priority",
    )
    # The client leaves out what is None and sends its defaults (stream_mode, stream_subgraphs and
    # stream_resumable False), all served, on every create and stream.
    run = client.runs.create("defaults", AGENT, input=ASK)
    client.runs.join("defaults", run["run_id"])
    # strict_resume: a resume that answers no waiting interrupt is refused and changes nothing.
    parts = list(client.runs.stream("defaults", AGENT, command=APPROVE, strict_resume=True))
    assert parts[0].event == "metadata"
    assert "Refund of $42.50 issued" in last_message(parts[-1].data)["content"]
    before = quiet_world()
    with pytest.raises((ConflictError, UnprocessableEntityError)):
        client.runs.create("defaults", AGENT, command=APPROVE, strict_resume=True)
    assert world() == before and Refund.objects.count() == 1


def test_cancelling_a_pending_resume_ends_the_thread_and_its_decision_never_takes_effect(
    slow_undo_client: Any,
) -> None:
    client = slow_undo_client
    thread_id = ask_refund(client)
    [first] = client.runs.list(thread_id)
    run = client.runs.create(thread_id, AGENT, command=APPROVE)
    assert client.runs.get(thread_id, run["run_id"])["status"] == "pending"
    with pytest.raises(ConflictError, match="cancel it first"):
        client.runs.delete(thread_id, run["run_id"])

    assert client.runs.cancel(thread_id, run["run_id"], wait=True, action="interrupt") is None

    assert client.runs.get(thread_id, run["run_id"])["status"] == "interrupted"
    assert client.threads.get(thread_id)["status"] == "idle"
    assert Thread.objects.get(pk=thread_id).status == "cancelled"
    assert ApprovalRequest.objects.get(thread_id=thread_id).status == "superseded"
    assert AuditEvent.objects.filter(action="thread.cancel", thread_id=thread_id).count() == 1
    assert Refund.objects.count() == 0
    with pytest.raises(ConflictError, match="pending or running"):
        client.runs.cancel(thread_id, run["run_id"])

    # A run that ended is deleted: its record goes, what it did stays.
    before = Checkpoint.objects.filter(thread_id=thread_id).count()
    client.runs.delete(thread_id, first["run_id"])
    with pytest.raises(NotFoundError):
        client.runs.get(thread_id, first["run_id"])
    assert [r["run_id"] for r in client.runs.list(thread_id)] == [run["run_id"]]
    assert Checkpoint.objects.filter(thread_id=thread_id).count() == before


def test_a_run_that_ended_is_not_cancelled_an_unknown_one_is_a_404_and_rollback_is_refused(
    client: Any,
) -> None:
    thread_id = ask_refund(client)
    [run] = client.runs.list(thread_id)  # it stopped at the gate: LangGraph's "interrupted"
    before = quiet_world()

    with pytest.raises(ConflictError, match="pending or running"):
        client.runs.cancel(thread_id, run["run_id"])
    for action, naming in (("rollback", "rollback"), ("undo", "interrupt")):
        with pytest.raises(UnprocessableEntityError, match=naming):
            client.runs.cancel(thread_id, run["run_id"], action=action)
    for unknown in ("00000000-0000-4000-8000-000000000000", "not-a-run"):
        with pytest.raises(NotFoundError, match="Run not found"):
            client.runs.cancel(thread_id, unknown)
        with pytest.raises(NotFoundError, match="Run not found"):
            client.runs.delete(thread_id, unknown)
    with pytest.raises(NotFoundError, match="Thread not found"):
        client.runs.cancel("no-such-thread", run["run_id"])
    assert world() == before
    assert Thread.objects.get(pk=thread_id).status == "waiting"


def test_only_operators_cancel_or_delete_runs(live_server_url: str, celery_worker: Any) -> None:
    thread_id = ask_refund(admins_client(live_server_url))
    [run] = LangGraphRun.objects.filter(thread_id=thread_id)
    rita = make_user("rita", "reviewer")
    client = get_sync_client(
        url=f"{live_server_url}/langgraph", api_key=do_create_token(user=rita, name="sdk")
    )
    before = quiet_world()

    with pytest.raises(PermissionDeniedError):
        client.runs.cancel(thread_id, str(run.pk))
    with pytest.raises(PermissionDeniedError):
        client.runs.delete(thread_id, str(run.pk))
    assert world() == before
