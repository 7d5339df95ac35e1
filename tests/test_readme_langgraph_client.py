"""README "From LangGraph's client and Agent Inbox", followed with LangGraph's own client (sync
and async) as its users write it: a wait that stops at a gate answers the interrupt beside the
values, a run that failed is raised, not answered as values, and the client learns each run it
starts (`on_run_created`), as LangGraph's server has them. Live uvicorn, a real worker."""

import asyncio
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import UnprocessableEntityError

from agents.examples.models import Refund
from approvals.models import ApprovalRequest
from checkpoints.models import LangGraphCheckpoint, Thread
from tests.langgraph_clients import client_fixture  # noqa: F401
from tests.live import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = "refunds_langgraph"
ASK = {"messages": [{"role": "user", "content": "Refund ORD-1001"}]}
APPROVE = {"resume": {"decisions": [{"type": "approve"}]}}


def asked_refund(result: dict[str, Any]) -> dict[str, Any]:
    """The action request of the one interrupt a run stopped at, as LangGraph's server answers it."""
    [interrupt] = result["__interrupt__"]
    [action] = interrupt["value"]["action_requests"]
    return dict(action)


def test_a_wait_stopped_at_a_gate_answers_its_interrupt_beside_the_values(client: Any) -> None:
    thread = client.threads.create()

    result = client.runs.wait(thread["thread_id"], AGENT, input=ASK)

    # LangGraph's documented human-in-the-loop loop: `result["__interrupt__"]`, then resume it.
    assert asked_refund(result)["args"] == {"order_id": "ORD-1001", "amount_cents": 4250}
    assert result["messages"][-1]["tool_calls"][0]["name"] == "issue_refund"
    [waiting] = client.threads.get_state(thread["thread_id"])["interrupts"]
    assert result["__interrupt__"][0]["id"] == waiting["id"]
    done = client.runs.wait(thread["thread_id"], AGENT, command=APPROVE)
    assert "__interrupt__" not in done and "Refund of $42.50 issued" in done["messages"][-1]["content"]

    # A stateless wait and a join say it too; the values stream's last chunk carries it.
    assert asked_refund(client.runs.wait(None, AGENT, input=ASK))["name"] == "issue_refund"
    run = client.runs.create("joined", AGENT, input=ASK)
    assert asked_refund(client.runs.join("joined", run["run_id"]))["name"] == "issue_refund"
    parts = [p for p in client.runs.stream("streamed", AGENT, input=ASK) if p.event == "values"]
    assert asked_refund(parts[-1].data)["name"] == "issue_refund"
    assert all("__interrupt__" not in p.data for p in parts[:-1])  # only where it stopped


def test_langgraphs_async_client_reads_the_interrupt_and_resumes_it(
    client: Any, live_server_url: str
) -> None:
    token = client.http.client.headers["x-api-key"]

    async def follow_the_readme() -> tuple[Any, Any]:
        aclient: Any = get_client(url=f"{live_server_url}/langgraph", api_key=token)
        thread = await aclient.threads.create()
        asked = await aclient.runs.wait(thread["thread_id"], AGENT, input=ASK)
        done = await aclient.runs.wait(thread["thread_id"], AGENT, command=APPROVE)
        return asked, done

    asked, done = asyncio.run(follow_the_readme())

    assert asked_refund(asked)["name"] == "issue_refund"
    assert "Refund of $42.50 issued" in done["messages"][-1]["content"]
    assert Refund.objects.count() == 1


def test_a_run_that_failed_is_raised_by_wait_not_answered_as_values(client: Any) -> None:
    client.runs.wait("fails", AGENT, input=ASK)
    # Someone alters LangGraph's checkpoint in the database: the resumed run fails its digest check.
    stored = LangGraphCheckpoint.objects.filter(thread_id="fails")
    latest = stored.order_by("-checkpoint_id").first()
    assert latest is not None
    stored.filter(checkpoint_id=latest.checkpoint_id).update(metadata={**latest.metadata, "forged": True})

    with pytest.raises(Exception, match=r"^RunError: .*digest check"):  # LangGraph's client raises it
        client.runs.wait("fails", AGENT, command=APPROVE)

    wait_for(lambda: Thread.objects.get(pk="fails").status == "failed", timeout=20, message="failed")
    [run, _] = client.runs.list("fails")
    assert run["status"] == "error"
    assert client.runs.join("fails", run["run_id"])["__error__"]["error"] == "RunError"
    assert Refund.objects.count() == 0


def test_langgraphs_client_learns_each_run_it_starts_from_on_run_created(client: Any) -> None:
    seen: list[dict[str, Any]] = []

    created = client.runs.create("located", AGENT, input=ASK, on_run_created=seen.append)
    client.runs.join("located", created["run_id"])
    client.runs.wait("located", AGENT, command=APPROVE, on_run_created=seen.append)
    list(client.runs.stream("streamed-here", AGENT, input=ASK, on_run_created=seen.append))
    client.runs.wait(None, AGENT, input=ASK, on_run_created=seen.append)  # a stateless one

    [streamed] = client.runs.list("streamed-here")
    runs = [*[r["run_id"] for r in client.runs.list("located")][::-1], streamed["run_id"]]
    assert [(s["thread_id"], s["run_id"]) for s in seen[:3]] == [
        ("located", runs[0]),
        ("located", runs[1]),
        ("streamed-here", runs[2]),
    ]
    kept = Thread.objects.exclude(pk__in=["located", "streamed-here"]).get()  # stopped at its gate
    assert (seen[3]["thread_id"], seen[3]["run_id"]) == (kept.pk, client.runs.list(kept.pk)[0]["run_id"])


def test_one_answer_to_an_interrupt_asking_two_actions_is_refused_and_both_wait(client: Any) -> None:
    both = {"messages": [{"role": "user", "content": "Please refund orders ORD-1001 and ORD-1003"}]}
    asked = client.runs.wait("two", AGENT, input=both)
    [interrupt] = asked["__interrupt__"]
    first, _ = interrupt["value"]["action_requests"]

    # Agent Inbox answers only the first action: refused, nothing decided, the thread still asks.
    with pytest.raises(UnprocessableEntityError, match="asks 2 decisions"):
        client.runs.create("two", AGENT, command=APPROVE)
    statuses = ApprovalRequest.objects.filter(thread_id="two").values_list("status", flat=True)
    assert list(statuses) == ["pending", "pending"]
    assert client.threads.get("two")["status"] == "interrupted"

    answers = [{"type": "approve"}, {"type": "reject", "message": "already refunded"}]
    client.runs.wait("two", AGENT, command={"resume": {"decisions": answers}})  # in request order

    assert list(Refund.objects.values_list("order_id", flat=True)) == [first["args"]["order_id"]]
    assert client.threads.get("two")["status"] == "idle"


def test_a_history_limit_outside_1_to_100_is_refused_not_cut_short(client: Any) -> None:
    client.runs.wait("paged", AGENT, input=ASK)
    every = client.threads.get_history("paged", limit=100)

    for limit in (0, 101, 1000):  # LangGraph's server takes up to 1000: here a 422, never 100 of them
        with pytest.raises(UnprocessableEntityError, match="limit"):
            client.threads.get_history("paged", limit=limit)

    [newest] = client.threads.get_history("paged", limit=1)
    assert newest == every[0] and len(every) == len(client.threads.get_history("paged"))


def test_a_waits_location_is_its_join_which_answers_the_same(client: Any) -> None:
    http = client.http.client  # LangGraph's client's own connection: its base URL and token
    answer = http.post("/threads/rejoined/runs/wait", json={"assistant_id": AGENT, "input": ASK})

    # Where LangGraph's client asks again for a wait whose answer was cut off.
    rejoined = http.get(answer.headers["Location"])

    assert answer.headers["Location"] == answer.headers["Content-Location"] + "/join"
    assert rejoined.status_code == 200 and rejoined.json() == answer.json()
    assert asked_refund(rejoined.json())["name"] == "issue_refund"
