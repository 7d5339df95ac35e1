"""A production trace becomes a test case: export a thread, replay its model steps against the
current agent code, and see where behaviour diverges."""

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from agents.examples.models import Refund
from approvals.models import AuditEvent
from tests.factories import Api, api_for, make_user
from tests.live import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def api(live_server_url: str, celery_worker: Any) -> Api:
    return api_for(make_user("ada", "admin"), live_server_url)


def finished_refund(api: Api) -> str:
    thread_id = api.post("/threads", {"agent": "refunds", "input": "Please refund order ORD-1001"}).json()[
        "id"
    ]
    thread = wait_for(
        lambda: (t := api.thread(thread_id))["status"] == "waiting" and t, timeout=20, message="gate"
    )
    api.post(
        f"/approvals/{thread['pending_approvals'][0]['id']}/decision",
        {"decision": "edit", "args": {"order_id": "ORD-1001", "amount_cents": 1000}},
    )
    wait_for(lambda: api.thread(thread_id)["status"] == "done", timeout=20, message="done")
    return thread_id


def test_an_export_holds_every_checkpoint_and_the_decisions(api: Api) -> None:
    thread_id = finished_refund(api)

    document = api.get(f"/threads/{thread_id}/export").json()

    assert document["format"] == "gatehouse.thread/1"
    assert [c["step"] for c in document["checkpoints"]] == [0, 1, 2, 3, 4, 5]
    [decision] = document["decisions"]
    assert (decision["status"], decision["decision_args"]) == (
        "edited",
        {"order_id": "ORD-1001", "amount_cents": 1000},
    )


def test_replaying_an_unchanged_trace_reports_no_divergence_and_runs_no_tool(
    api: Api, tmp_path: Path
) -> None:
    thread_id = finished_refund(api)
    trace = tmp_path / "trace.json"
    call_command("export_thread", thread_id, str(trace))  # as the API's export, to a file
    written, served = json.loads(trace.read_text()), api.get(f"/threads/{thread_id}/export").json()
    assert written.pop("exported_at") <= served.pop("exported_at") and written == served
    with pytest.raises(CommandError, match="No thread 'no-such-thread'"):
        call_command("export_thread", "no-such-thread", str(tmp_path / "none.json"))
    refunds = Refund.objects.count()

    call_command("replay_thread", str(trace))

    assert Refund.objects.count() == refunds


def test_replay_reports_the_step_where_behaviour_diverges(api: Api, tmp_path: Path) -> None:
    thread_id = finished_refund(api)
    document = api.get(f"/threads/{thread_id}/export").json()
    recorded = next(c for c in document["checkpoints"] if c["step"] == 3)  # the model proposed the refund
    recorded["values"]["messages"][-1]["tool_calls"][0]["function"]["arguments"] = (
        '{"order_id": "ORD-1001", "amount_cents": 1}'
    )
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(document))

    with pytest.raises(CommandError, match="diverged"):
        call_command("replay_thread", str(trace))


def test_an_import_recreates_the_tree_and_asks_open_gates_afresh(api: Api) -> None:
    thread_id = api.post("/threads", {"agent": "refunds", "input": "Please refund order ORD-1002"}).json()[
        "id"
    ]
    wait_for(lambda: api.thread(thread_id)["status"] == "waiting", timeout=20, message="gate")
    document = api.get(f"/threads/{thread_id}/export").json()

    response = api.post("/imports?thread_id=imported-1", document)

    assert response.status_code == 201, response.text
    imported = response.json()
    assert imported["status"] == "waiting"
    assert imported["values"] == api.thread(thread_id)["values"]
    [approval] = imported["pending_approvals"]
    assert approval["args"] == {"order_id": "ORD-1002", "amount_cents": 12999}
    steps = [c["step"] for c in api.get("/threads/imported-1/history").json()]
    assert steps == [3, 2, 1, 0]
    [event] = AuditEvent.objects.filter(action="thread.import")
    assert (event.thread_id, event.data["imported_from"]) == ("imported-1", thread_id)
    assert api.post("/imports?thread_id=imported-1", document).status_code == 409
    assert api.post("/imports", {"format": "nope"}).status_code == 400
    assert AuditEvent.objects.filter(action="thread.import").count() == 1
