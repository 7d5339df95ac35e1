"""Stateless runs of the LangGraph server API (`client.runs.wait(None, ...)`, `stream(None, ...)`,
`create(None, ...)`): each starts a thread of its own, with the rights of any start, shown in the
console like any thread while it exists, and deleted once its run has ended (on_completion
"delete", LangGraph's default) or kept ("keep"). A run that stops at a gate keeps its thread: the
request waits for a reviewer, and its thread is an ordinary one from then on. What a stateless
run cannot be asked is a 422 naming it, and nothing starts. /info says what is served. Driven by
langgraph-sdk's own client against live uvicorn, a real worker and the offline model."""

from typing import Any

import pytest
from django.test import Client
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError, PermissionDeniedError

from agents import signals
from agents.examples.models import Refund
from agents.offline.rules import ASK_ORDER
from agents.registry import registry
from approvals.actions.langgraph_runs import do_end_stateless_run
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, AuditEvent, LangGraphRun
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import Checkpoint, CheckpointSource, LangGraphCheckpoint, Thread, ThreadStatus
from tests.factories import make_user
from tests.langgraph_clients import client_fixture  # noqa: F401
from tests.live import wait_for
from tests.test_langgraph_run_options import refusal, refused, world
from tests.test_langgraph_sdk_compat import APPROVE, ASK
from tests.test_langgraph_server_api import AGENT

pytestmark = pytest.mark.django_db(transaction=True)

HELLO: dict[str, Any] = {"messages": [{"role": "user", "content": "Hello"}]}  # answered at once: no gate


def only_thread() -> Thread:
    [thread] = Thread.objects.filter(agent=AGENT)
    return thread


def deleted_by_its_run(thread_id: str) -> dict[str, Any]:
    """The ledger's record of the deletion of a stateless run's thread."""
    [event] = AuditEvent.objects.filter(action="thread.delete", thread_id=thread_id)
    assert event.actor_name == "ada"
    data: dict[str, Any] = event.data
    return data


def test_a_stateless_wait_answers_the_runs_values_and_deletes_its_thread_once_the_run_ended(
    client: Any,
) -> None:
    response = client.http.client.post("/runs/wait", json={"assistant_id": AGENT, "input": HELLO})

    assert response.status_code == 200
    assert response.json()["messages"][-1]["content"] == ASK_ORDER
    thread_id = response.headers["Content-Location"].split("/")[2]  # /threads/{id}/runs/{run}
    assert not Thread.objects.exists() and not LangGraphRun.objects.exists()
    assert not Checkpoint.objects.exists() and not LangGraphCheckpoint.objects.exists()
    recorded = deleted_by_its_run(thread_id)
    assert (recorded["on_completion"], recorded["status"], recorded["agent"]) == ("delete", "done", AGENT)

    kept = client.runs.wait(None, AGENT, input=HELLO, on_completion="keep", metadata={"ticket": "T-7"})

    assert kept["messages"][-1]["content"] == ASK_ORDER
    thread = only_thread()
    assert thread.status == "done"
    [run] = client.runs.list(thread.pk)
    assert (run["status"], run["metadata"]) == ("success", {"ticket": "T-7"})
    assert [t["thread_id"] for t in client.threads.search(metadata={"graph_id": AGENT})] == [thread.pk]
    # if_not_exists is moot (a stateless run always makes its thread), as on LangGraph's server.
    client.runs.wait(None, AGENT, input=HELLO, if_not_exists="reject")
    assert Thread.objects.count() == 1


def test_a_stateless_stream_streams_its_run_then_deletes_its_thread(client: Any) -> None:
    parts = list(client.runs.stream(None, AGENT, input=HELLO, stream_mode=["values", "updates"]))

    assert parts[0].event == "metadata"
    assert ("updates", ["model"]) in [(p.event, list(p.data)) for p in parts]
    assert parts[-1].event == "values" and parts[-1].data["messages"][-1]["content"] == ASK_ORDER
    assert not Thread.objects.exists() and not LangGraphRun.objects.exists()
    [deletion] = AuditEvent.objects.filter(action="thread.delete")
    assert deletion.data["stateless_run"] == parts[0].data["run_id"]  # the run the stream announced

    list(client.runs.stream(None, AGENT, input=HELLO, on_completion="keep"))
    assert only_thread().status == "done"


def test_a_stateless_run_stopped_at_a_gate_keeps_its_thread_and_its_request_for_a_reviewer(
    client: Any,
) -> None:
    values = client.runs.wait(None, AGENT, input=ASK)
    assert values["messages"][-1]["tool_calls"][0]["name"] == "issue_refund"
    waited = only_thread()
    parts = list(client.runs.stream(None, AGENT, input=ASK, stream_mode="updates"))
    assert "__interrupt__" in parts[-1].data
    streamed = Thread.objects.exclude(pk=waited.pk).get(agent=AGENT)

    for thread in (waited, streamed):
        assert thread.status == "waiting"
        assert ApprovalRequest.objects.get(thread_id=thread.pk).status == "pending"  # in the inbox
        assert [r["status"] for r in client.runs.list(thread.pk)] == ["interrupted"]
    interrupted = client.threads.search(status="interrupted")  # what Agent Inbox lists
    assert {t["thread_id"] for t in interrupted} == {waited.pk, streamed.pk}
    # In the console like any thread: its page, the inbox's request, the operator's thread list.
    operator = Client()
    operator.force_login(make_user("olga", "operator"))
    page = operator.get(f"/threads/{waited.pk}/")
    assert page.status_code == 200 and waited.pk in page.content.decode()
    listed = operator.get("/threads/").content.decode()
    assert waited.pk in listed and streamed.pk in listed
    assert not AuditEvent.objects.filter(action="thread.delete").exists()

    # Decided, the thread runs on and stays: from the gate on it is an ordinary thread.
    values = client.runs.wait(waited.pk, AGENT, command=APPROVE)

    assert "Refund of $42.50 issued" in values["messages"][-1]["content"]
    assert Thread.objects.get(pk=waited.pk).status == "done"
    assert Refund.objects.count() == 1


def gone(client: Any, thread_id: str) -> bool:
    """Whether the thread is gone, as LangGraph's client sees it (a 404)."""
    try:
        client.threads.get(thread_id)
    except NotFoundError:
        return True
    return False


def test_a_background_stateless_runs_thread_is_deleted_by_the_worker_once_the_run_ended(client: Any) -> None:
    # on_completion left out is "delete", as on LangGraph's server; nothing waits for the run here.
    runs = [
        client.runs.create(None, AGENT, input=HELLO),
        client.runs.create(None, AGENT, input=HELLO, on_completion="delete"),
    ]

    for run in runs:
        thread_id = run["thread_id"]
        assert run["status"] == "pending" and thread_id
        wait_for(lambda: gone(client, thread_id), timeout=30, message="the thread deleted")  # noqa: B023
        with pytest.raises(NotFoundError):  # its runs went with it, as on LangGraph's server
            client.runs.get(run["thread_id"], run["run_id"])
        recorded = deleted_by_its_run(run["thread_id"])
        assert (recorded["on_completion"], recorded["stateless_run"], recorded["status"]) == (
            "delete",
            run["run_id"],
            "done",
        )
    assert not Thread.objects.exists() and not LangGraphRun.objects.exists()
    assert not Checkpoint.objects.exists() and not LangGraphCheckpoint.objects.exists()


def test_a_background_stateless_run_stopped_at_a_gate_or_asked_to_keep_keeps_its_thread(client: Any) -> None:
    run = client.runs.create(None, AGENT, input=ASK)
    client.runs.join(run["thread_id"], run["run_id"])
    assert client.runs.get(run["thread_id"], run["run_id"])["status"] == "interrupted"
    assert client.threads.get(run["thread_id"])["status"] == "interrupted"
    assert ApprovalRequest.objects.get(thread_id=run["thread_id"]).status == "pending"  # in the inbox

    # Decided, the thread runs on and stays: from the gate on it is an ordinary thread.
    values = client.runs.wait(run["thread_id"], AGENT, command=APPROVE)
    assert "Refund of $42.50 issued" in values["messages"][-1]["content"]
    assert client.threads.get(run["thread_id"])["status"] == "idle"

    refused(
        lambda: client.runs.create(None, AGENT, input=HELLO, on_completion="archive"), naming="on_completion"
    )
    kept = client.runs.create(None, AGENT, input=HELLO, on_completion="keep")
    assert client.runs.join(kept["thread_id"], kept["run_id"])["messages"][-1]["content"] == ASK_ORDER
    assert client.threads.get(kept["thread_id"])["status"] == "idle"
    assert client.runs.get(kept["thread_id"], kept["run_id"])["status"] == "success"
    assert not AuditEvent.objects.filter(action="thread.delete").exists()


def ended_thread(thread_id: str, *, status: str, by: Any) -> LangGraphRun:
    """A background stateless run (on_completion "delete") of `by`, whose thread ended as `status`."""
    get_backend().create_thread(
        thread_id=thread_id,
        agent=AGENT,
        first=NewCheckpoint(
            values=registry.get(AGENT).initial_values("Hello"), source=CheckpointSource.INPUT
        ),
        status=ThreadStatus(status),
    )
    return LangGraphRun.objects.create(
        thread_id=thread_id, assistant=AGENT, started_by=by, deletes_thread=True
    )


def make_request(thread_id: str, **decided: Any) -> None:
    """A request the thread stopped at, decided as `decided` says."""
    thread = Thread.objects.get(pk=thread_id)
    ApprovalRequest.objects.create(
        thread=thread,
        checkpoint_id=str(thread.head_id),
        key=f"call_{thread_id}",
        agent=AGENT,
        action="issue_refund",
        args={"order_id": "ORD-1001", "amount_cents": 4250},
        allowed_decisions=["approve", "reject"],
        state_digest="0" * 64,
        **decided,
    )


def announce_end(thread_id: str, *, status: str, resent: bool = False) -> None:
    """What the worker sends once the step that ended the thread commits (agents.dispatch), again
    (resent) when that step is redelivered after its commit."""
    extra = {"resent": True} if resent else {}
    signals.thread_changed.send(sender=None, thread_id=thread_id, checkpoint_id=None, status=status, **extra)


def test_a_background_runs_end_seen_twice_deletes_its_thread_once_and_a_reviewed_one_is_kept() -> None:
    ada = make_user("ada", "admin")
    ended_thread("failed-run", status="failed", by=ada)

    announce_end("failed-run", status="failed")
    announce_end("failed-run", status="failed", resent=True)  # a redelivered step: already gone

    assert not Thread.objects.filter(pk="failed-run").exists()
    assert deleted_by_its_run("failed-run")["status"] == "failed"  # recorded once

    # A thread that stopped at a gate for a reviewer is theirs: kept once decided and done.
    ended_thread("reviewed", status="done", by=ada)
    make_request("reviewed", status="approved", decided_by=ada)
    # One no person saw (a policy decided its request) is deleted as any other.
    ended_thread("by-policy", status="done", by=ada)
    make_request("by-policy", status="approved", policy_name="small refunds")
    # Its user gone, nobody is left to record the deletion as: kept.
    gone_user = make_user("gone", "operator")
    ended_thread("orphan", status="done", by=gone_user)
    gone_user.delete()
    ended_thread("waiting", status="waiting", by=ada)
    for thread_id in ("reviewed", "by-policy", "orphan", "waiting"):
        announce_end(thread_id, status=str(Thread.objects.get(pk=thread_id).status))

    assert sorted(Thread.objects.values_list("pk", flat=True)) == ["orphan", "reviewed", "waiting"]
    assert deleted_by_its_run("by-policy")["status"] == "done"


def test_what_a_stateless_run_cannot_be_asked_is_refused_naming_it_and_starts_nothing(client: Any) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"command": APPROVE}, "command"),  # no interrupt to answer on a new thread
        ({"checkpoint_id": "1f0-abc"}, "checkpoint_id"),
        ({"checkpoint": {"checkpoint_id": "1f0-abc"}}, "checkpoint"),
        ({"config": {"configurable": {"thread_id": "someone-elses"}}}, "config.configurable.thread_id"),
        ({"config": {"configurable": {"checkpoint_id": "1f0-abc"}}}, "config.configurable.checkpoint_id"),
        ({"config": {"recursion_limit": 3}}, "config.recursion_limit"),
        ({"on_completion": "archive"}, "on_completion"),
        ({"interrupt_before": ["tools"]}, "interrupt_before"),
        ({"webhook": "https://example.com/hook"}, "webhook"),
        ({"multitask_strategy": "enqueue"}, "multitask_strategy"),
        ({"on_disconnect": "cancel"}, "on_disconnect"),
    ]
    before = world()
    for options, naming in cases:
        for call in (client.runs.wait, client.runs.stream):
            response = refusal(
                lambda call=call, options=options: list(call(None, AGENT, input=ASK, **options))
            )
            detail = response.json()["detail"]
            assert response.status_code == 422 and naming in detail and "nothing was done" in detail.lower()
    response = refusal(lambda: list(client.runs.stream(None, AGENT, input=ASK, stream_resumable=True)))
    assert response.status_code == 422 and "stream_resumable" in response.json()["detail"]
    for body in ({"assistant_id": AGENT, "input": {"messages": []}}, {"assistant_id": AGENT}):
        response = client.http.client.post("/runs/wait", json=body)
        assert response.status_code == 422 and "input" in response.json()["detail"]
    assert world() == before and not Thread.objects.exists()


def test_only_an_operators_or_admins_token_starts_a_stateless_run(
    live_server_url: str, celery_worker: Any
) -> None:
    rita = make_user("rita", "reviewer")
    reviewer = get_sync_client(
        url=f"{live_server_url}/langgraph", api_key=do_create_token(user=rita, name="sdk")
    )
    before = world()

    with pytest.raises(PermissionDeniedError):
        reviewer.runs.create(None, AGENT, input=HELLO, on_completion="keep")
    for path in ("/runs/wait", "/runs/stream"):
        response = reviewer.http.client.post(path, json={"assistant_id": AGENT, "input": HELLO})
        assert (response.status_code, response.json()) == (
            403,
            {"detail": "Only operators and admins may start threads."},
        )

    assert world() == before


def test_info_flags_say_what_is_served(client: Any) -> None:
    info = client.http.get("/info")

    assert info["flags"] == {
        "assistants": True,
        "crons": False,  # crons are not served
        "langsmith": False,  # nothing is traced to LangSmith
        "langsmith_tracing_replicas": False,
        "langsmith_tracing_session_on_runs": False,
        # The one flag LangGraph's client names (strict_resume): every resume here is strict.
        "strict_resume": True,
    }


def test_a_stateless_runs_thread_is_deleted_only_once_its_run_has_ended() -> None:
    """The rule runs.wait and runs.stream apply when their answer ends: a thread still running
    (the wait's LANGGRAPH_RUN_WAIT_S ran out, a stream's client went away), paused or waiting at
    a gate is kept; one done, failed or cancelled is deleted."""
    ada = make_user("ada", "admin")
    agent = registry.get(AGENT)
    for status in ("running", "paused", "waiting", "done", "failed", "cancelled"):
        thread_id = f"stateless-{status}"
        get_backend().create_thread(
            thread_id=thread_id,
            agent=AGENT,
            first=NewCheckpoint(values=agent.initial_values("Hello"), source=CheckpointSource.INPUT),
            status=ThreadStatus(status),
        )
        run = LangGraphRun.objects.create(thread_id=thread_id, assistant=AGENT)

        deleted = do_end_stateless_run(run, user=ada)

        assert deleted == (status in ("done", "failed", "cancelled"))
        assert Thread.objects.filter(pk=thread_id).exists() != deleted
    assert sorted(AuditEvent.objects.filter(action="thread.delete").values_list("thread_id", flat=True)) == [
        "stateless-cancelled",
        "stateless-done",
        "stateless-failed",
    ]
