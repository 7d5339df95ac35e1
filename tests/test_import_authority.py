"""An import carries no authority: what a reviewer approves on an imported thread is what runs,
a document that cannot be read is a 400 (nothing written), and the thread comes back as it was
exported (its status, its tenant)."""

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from agents.actions import do_resume, do_start_thread
from agents.examples.models import Refund
from agents.registry import registry
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.tokens import do_create_token
from approvals.actions.transfer import InvalidExport, check_import, do_import_thread, export_thread
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.tests.helpers import steps_sent
from approvals.tests.test_run_again_warnings import offline_url, refunded_to_the_end, run_until_it_stops
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import CheckpointSource, Thread, ThreadStatus
from checkpoints.store import tenant_of
from tests.factories import make_gate, make_user

__all__ = ["offline_url"]  # a fixture, used by name

pytestmark = pytest.mark.django_db

# LangGraph runs nodes and tools in threads, each on a connection of its own: committed rows only.
COMMITTED = pytest.mark.django_db(transaction=True)
LANGGRAPH = "refunds_langgraph"


@pytest.fixture(autouse=True)
def no_connection_left_behind() -> Iterator[None]:
    yield
    registry.get(LANGGRAPH).saver.close_connection()  # type: ignore[attr-defined]


@pytest.fixture
def at_a_refund(monkeypatch: pytest.MonkeyPatch, settings: Any, offline_url: str) -> str:
    """A refunds_langgraph thread waiting at its refund of ORD-1001 (4250 cents)."""
    settings.DECISION_UNDO_S, settings.OPENAI_BASE_URL = 0, offline_url
    steps_sent(monkeypatch)
    thread, _ = do_start_thread(
        agent=registry.get(LANGGRAPH), text="Please refund order ORD-1001", thread_id=None, actor="user:ada"
    )
    assert run_until_it_stops(thread.id).status == ThreadStatus.WAITING
    return thread.id


def head_of(document: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = next(
        c for c in document["checkpoints"] if c["id"] == document["thread"]["head"]
    )["values"]
    return values


def approve_and_run(thread_id: str) -> ThreadStatus:
    rita = make_user("rita", "reviewer")
    asked = ApprovalRequest.objects.get(thread_id=thread_id, status=ApprovalStatus.PENDING)
    do_decide(asked, reviewer=rita, valid=check_decision(asked, user=rita, decision="approve"))
    return ThreadStatus(run_until_it_stops(thread_id).status)


@COMMITTED
def test_an_imported_langgraph_thread_runs_the_refund_its_reviewer_approved(at_a_refund: str) -> None:
    document = export_thread(Thread.objects.get(pk=at_a_refund))

    do_import_thread(check_import(document, thread_id="lg-copy"), user=None)

    asked = ApprovalRequest.objects.get(thread_id="lg-copy", status=ApprovalStatus.PENDING)
    assert asked.args == {"order_id": "ORD-1001", "amount_cents": 4250}
    assert approve_and_run("lg-copy") == ThreadStatus.DONE
    assert list(Refund.objects.values_list("thread_id", "amount_cents")) == [("lg-copy", 4250)]


@COMMITTED
def test_a_langgraph_import_whose_interrupts_differ_from_langgraphs_is_refused(at_a_refund: str) -> None:
    document = export_thread(Thread.objects.get(pk=at_a_refund))
    [request] = head_of(document)["interrupts"][0]["value"]["action_requests"]
    request["args"]["amount_cents"] = 1  # the reviewer would approve 1 cent; LangGraph holds 4250

    with pytest.raises(InvalidExport, match="not those LangGraph holds"):
        check_import(document, thread_id="lg-copy")


@COMMITTED
def test_a_langgraph_import_cannot_adopt_another_threads_langgraph_checkpoints(at_a_refund: str) -> None:
    other = refunded_to_the_end(LANGGRAPH)
    document = export_thread(Thread.objects.get(pk=at_a_refund))
    head = head_of(document)
    head["langgraph_thread"] = other  # another conversation of this installation

    with pytest.raises(InvalidExport, match="not the thread it was exported from"):
        check_import(document, thread_id="lg-copy")


@COMMITTED
def test_a_finished_langgraph_thread_imports_finished(at_a_refund: str) -> None:
    assert approve_and_run(at_a_refund) == ThreadStatus.DONE
    document = export_thread(Thread.objects.get(pk=at_a_refund))

    thread = do_import_thread(check_import(document, thread_id="lg-done"), user=None)

    assert thread.status == ThreadStatus.DONE


def langgraph_document(interrupts: list[Any]) -> dict[str, Any]:
    """A hand-written refunds_langgraph document whose head holds `interrupts`."""
    user = {"id": "m1", "role": "user", "content": "Refund me"}

    def checkpoint(cid: str, parent: str | None, step: int, values: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": cid,
            "parent_id": parent,
            "step": step,
            "source": "input" if parent is None else "step",
            "node": "" if parent is None else "run",
            "next": ["run"],
            "created_by": "x",
            "created_at": f"2024-05-01T10:00:0{step}+00:00",
            "schema_version": 1,
            "metadata": {},
            "digest": "",
            "values": values,
        }

    head = {
        "messages": [user],
        "langgraph_thread": "lg-1",
        "langgraph_checkpoint": "x",
        "interrupts": interrupts,
    }
    return {
        "format": "gatehouse.thread/1",
        "exported_at": "2024-05-01T10:00:00+00:00",
        "thread": {"id": "lg-1", "agent": LANGGRAPH, "status": "paused", "head": "c2"},
        "checkpoints": [
            checkpoint("c1", None, 0, {"messages": [user], "prompt": "Refund me"}),
            checkpoint("c2", "c1", 1, head),
        ],
        "decisions": [],
    }


UNREADABLE_INTERRUPTS = [
    pytest.param([{"id": "i1", "value": "not an interrupt"}], "HumanInterrupt list", id="a string"),
    pytest.param([{"id": "i1", "value": {"action_requests": []}}], "asks about no action", id="no action"),
    pytest.param(
        [{"value": {"action_requests": [{"name": "issue_refund", "args": {}}]}}], "KeyError", id="no id"
    ),
]


@pytest.mark.parametrize(("interrupts", "named"), UNREADABLE_INTERRUPTS)
def test_an_import_whose_interrupts_cannot_be_read_is_a_400_naming_them(interrupts: Any, named: str) -> None:
    token = do_create_token(user=make_user("olga", "operator"))

    response = Client(raise_request_exception=False).post(
        "/api/imports?thread_id=lg-imp",
        data=json.dumps(langgraph_document(interrupts)),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )

    assert response.status_code == 400, response.content
    assert "checkpoint c2: cannot work out the gates it needs" in response.json()["detail"]
    assert named in response.json()["detail"]
    assert not Thread.objects.filter(pk="lg-imp").exists()


@pytest.mark.parametrize(("interrupts", "named"), UNREADABLE_INTERRUPTS)
def test_import_thread_says_it_cannot_read_an_interrupt(tmp_path: Path, interrupts: Any, named: str) -> None:
    path = tmp_path / "thread.json"
    path.write_text(json.dumps(langgraph_document(interrupts)))

    with pytest.raises(CommandError, match=named):
        call_command("import_thread", str(path), "--as", "lg-cmd")
    assert not Thread.objects.filter(pk="lg-cmd").exists()


@COMMITTED
def test_a_langgraph_import_naming_a_checkpoint_this_installation_lacks_is_refused() -> None:
    asked = {"action_requests": [{"name": "issue_refund", "args": {"order_id": "ORD-1", "amount_cents": 1}}]}
    document = langgraph_document([{"id": "i1", "value": asked}])

    with pytest.raises(InvalidExport, match="imports only where it ran"):
        check_import(document, thread_id="lg-imp")


def test_a_failed_thread_stopped_at_a_gate_imports_failed_and_waits_for_its_gate_when_resumed() -> None:
    gate = make_gate()
    get_backend().set_status(thread_id=gate.thread_id, status=ThreadStatus.FAILED)
    document = export_thread(Thread.objects.get(pk=gate.thread_id))

    thread = do_import_thread(check_import(document, thread_id="copy-failed"), user=None)

    assert thread.status == ThreadStatus.FAILED
    [asked] = ApprovalRequest.objects.filter(thread_id="copy-failed", status=ApprovalStatus.PENDING)
    assert asked.args == gate.args  # asked afresh, for when an operator resumes it
    assert do_resume("copy-failed", actor="user:olga").status == ThreadStatus.WAITING
    assert not Refund.objects.exists()


def tenanted_thread(thread_id: str, *, tenant: str) -> Thread:
    agent = registry.get("refunds")
    get_backend().create_thread(
        thread_id=thread_id,
        agent="refunds",
        status=ThreadStatus.DONE,
        first=NewCheckpoint(values=agent.initial_values("hi"), source=CheckpointSource.INPUT),
        metadata={"tenant": tenant},
    )
    return Thread.objects.get(pk=thread_id)


def test_an_imported_thread_keeps_its_tenant() -> None:
    document = export_thread(tenanted_thread("acme-1", tenant="acme"))

    thread = do_import_thread(check_import(document, thread_id="acme-copy"), user=None)

    assert document["thread"]["tenant"] == "acme"
    assert tenant_of(thread) == "acme"


def test_a_document_without_a_tenant_imports_untenanted_and_a_bad_tenant_is_refused() -> None:
    document = export_thread(tenanted_thread("acme-2", tenant="acme"))
    older = copy.deepcopy(document)
    del older["thread"]["tenant"]
    document["thread"]["tenant"] = "a/b"

    with pytest.raises(InvalidExport, match=r"thread\.tenant"):
        check_import(document, thread_id="bad-tenant")
    thread = do_import_thread(check_import(older, thread_id="untenanted"), user=None)

    assert tenant_of(thread) == "agent:refunds"
