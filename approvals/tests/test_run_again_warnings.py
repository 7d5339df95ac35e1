"""What a fork or an edit may run again: every gated call whose result was recorded on the
branch, for native agents and framework adapters alike, named once, on the fork dialog and on
the operator's state editor."""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn
from django.conf import settings as django_settings
from django.test import Client

from agents import runtime
from agents.actions import do_start_thread, replay_warnings
from agents.examples.models import Refund
from agents.offline import server as offline
from agents.registry import registry
from approvals.actions.decisions import check_decision, do_decide
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.tests.helpers import steps_sent
from approvals.tests.test_threads import approved_step_with
from checkpoints.backends import get_backend
from checkpoints.backends.base import ThreadData
from checkpoints.models import Checkpoint, ThreadStatus
from tests.factories import make_user

pytestmark = pytest.mark.django_db

# LangGraph, pydantic-ai and the OpenAI Agents SDK run nodes and tools in threads, each on a
# connection of its own: they see committed rows only.
COMMITTED = pytest.mark.django_db(transaction=True)
AGENTS = [
    "refunds",
    pytest.param("refunds_langgraph", marks=COMMITTED),
    pytest.param("refunds_pydantic_ai", marks=COMMITTED),
    pytest.param("refunds_openai_agents", marks=COMMITTED),
]


@pytest.fixture(autouse=True)
def no_connection_left_behind() -> Iterator[None]:
    """The LangGraph agent's saver keeps a connection on a thread of its own: closed after each
    test, it does not hold the test database open at the end of the run."""
    yield
    registry.get("refunds_langgraph").saver.close_connection()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def offline_url() -> Iterator[str]:
    """The built-in offline model's endpoint, served from a thread of this process."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = uvicorn.Config(offline.chat_completions, port=port, lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    while not server.started:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}{offline.PATH.removesuffix('/chat/completions')}"
    server.should_exit = True
    serving.join(timeout=5)


@contextmanager
def offline_model(agent: str) -> Iterator[None]:
    """pydantic-ai's example built its model at import, from the settings of that moment; the
    others read OPENAI_BASE_URL at each call."""
    if agent != "refunds_pydantic_ai":
        yield
        return
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from agents.examples.refunds_pydantic_ai import support

    provider = OpenAIProvider(base_url=django_settings.OPENAI_BASE_URL, api_key="offline")
    with support.override(model=OpenAIChatModel(django_settings.OPENAI_MODEL, provider=provider)):
        yield


def run_until_it_stops(thread_id: str) -> ThreadData:
    """Run the thread's steps in this process, as a worker would, until it is no longer running."""
    for _ in range(10):
        thread = get_backend().get_thread(thread_id=thread_id)
        if thread.status != ThreadStatus.RUNNING:
            return thread
        runtime.run_step(thread_id=thread_id, checkpoint_id=str(thread.head_id), worker="w1")
    raise AssertionError(f"thread {thread_id} still running after 10 steps")


def refunded_to_the_end(agent: str) -> str:
    """A thread of `agent` whose refund a reviewer approved and which then ran to its end."""
    thread, _ = do_start_thread(
        agent=registry.get(agent), text="Please refund order ORD-1001", thread_id=None, actor="user:ada"
    )
    with offline_model(agent):
        assert run_until_it_stops(thread.id).status == ThreadStatus.WAITING
        rita = make_user("rita", "reviewer")
        request_ = ApprovalRequest.objects.get(thread_id=thread.id, status=ApprovalStatus.PENDING)
        do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))
        assert run_until_it_stops(thread.id).status == ThreadStatus.DONE
    return thread.id


@pytest.mark.parametrize("agent", AGENTS)
def test_a_fork_from_before_a_refund_that_ran_to_the_end_warns_of_it_once(
    monkeypatch: pytest.MonkeyPatch, settings: Any, offline_url: str, agent: str
) -> None:
    settings.DECISION_UNDO_S, settings.OPENAI_BASE_URL = 0, offline_url
    steps_sent(monkeypatch)
    thread_id = refunded_to_the_end(agent)
    first = str(Checkpoint.objects.get(thread_id=thread_id, step=0).pk)
    head = str(get_backend().get_thread(thread_id=thread_id).head_id)

    warnings = replay_warnings(thread_id, checkpoint_id=first)

    assert Refund.objects.count() == 1
    assert [w["tool"] for w in warnings] == ["issue_refund"]  # once, whichever list names it
    assert "ORD-1001" in str(warnings[0]["arguments"])
    assert replay_warnings(thread_id, checkpoint_id=head) == []


@COMMITTED
def test_the_fork_dialog_of_a_langgraph_thread_names_the_refund_that_ran(
    monkeypatch: pytest.MonkeyPatch, settings: Any, offline_url: str
) -> None:
    settings.DECISION_UNDO_S, settings.OPENAI_BASE_URL = 0, offline_url
    steps_sent(monkeypatch)
    thread_id = refunded_to_the_end("refunds_langgraph")
    first = Checkpoint.objects.get(thread_id=thread_id, step=0)
    browser = Client()
    browser.force_login(make_user("olga", "operator"))

    html = browser.get(f"/threads/{thread_id}/checkpoints/{first.pk}/").content.decode()

    warned = html.partition("data-run-again>")[2].partition("</div>")[0]
    assert "What will run again" in warned and "ORD-1001" in warned and "issue_refund" in warned


def fail_after_the_tool(thread_id: str, gate: str) -> None:
    raise RuntimeError("the worker lost its step after the refund committed")


def test_the_state_editor_warns_of_a_refund_that_ran_though_its_step_wrote_no_checkpoint(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    thread_id, gate, outcome = approved_step_with(
        monkeypatch, settings=settings, meanwhile=fail_after_the_tool
    )
    browser = Client()
    browser.force_login(make_user("olga", "operator"))

    html = browser.get(f"/threads/{thread_id}/state/").content.decode()

    assert outcome.kind == "failed" and Refund.objects.count() == 1  # done, yet in no state
    assert str(get_backend().get_thread(thread_id=thread_id).head_id) == gate
    warned = html.partition("data-run-again>")[2].partition("</div>")[0]
    assert "What will run again" in warned and "ORD-1001" in warned and "issue_refund" in warned


def test_the_state_editor_warns_of_nothing_once_the_refunds_step_landed(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    thread_id, _, outcome = approved_step_with(monkeypatch, settings=settings, meanwhile=lambda *_: None)
    get_backend().set_status(thread_id=thread_id, status=ThreadStatus.PAUSED)
    browser = Client()
    browser.force_login(make_user("olga", "operator"))

    html = browser.get(f"/threads/{thread_id}/state/").content.decode()

    assert outcome.kind == "stepped" and "data-run-again" not in html
