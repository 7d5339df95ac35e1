"""Celery beat enforces expiry policies and idle claims: a real beat process, a real worker.

Beat runs the sweeps every INBOX_SWEEP_INTERVAL_S (1 s here); the session's worker executes
them. An auto-rejected request resumes its thread and the agent reads the stated reason; an
escalated one moves queue; an idle claim goes back to the queue; each is audited.
"""

import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from agents.examples.models import Refund
from agents.tools import Expiry
from approvals.actions.claims import do_claim
from approvals.models import ApprovalRequest, AuditEvent
from approvals.tests.helpers import gate_with_expiry
from checkpoints.backends import get_backend
from checkpoints.models import Thread
from tests.factories import make_user
from tests.live import LiveServices, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def beat(live_services: LiveServices, celery_worker: Any, tmp_path: Path) -> Iterator[None]:
    command = [
        *(sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "info"),
        *("-s", str(tmp_path / "schedule"), "--pidfile="),
    ]
    process = live_services.spawn("beat", command, {"INBOX_SWEEP_INTERVAL_S": "1"})
    yield
    live_services.stop(process)


def test_beat_auto_rejects_an_expired_request_and_the_agent_reads_the_reason(
    monkeypatch: pytest.MonkeyPatch, beat: None
) -> None:
    reason = "Refunds over $40 need a decision within a second in this test."
    request_ = gate_with_expiry(monkeypatch, Expiry(1, "reject", reason=reason))

    done = Thread.objects.filter(pk=request_.thread_id, status="done")
    wait_for(done.exists, timeout=30, message="the thread to resume and finish")
    thread = done.get()

    request_.refresh_from_db()
    assert (request_.status, request_.status_reason) == ("expired", reason)
    messages = get_backend().get(thread_id=thread.id).values["messages"]
    tool_results = [m["content"] for m in messages if m["role"] == "tool"]
    assert tool_results[-1] == f"Rejected automatically, no reviewer decided in time: {reason}"
    assert messages[-1]["content"].endswith(reason)
    assert Refund.objects.count() == 0
    event = AuditEvent.objects.get(action="expiry.reject")
    assert (event.actor_name, event.approval_ref) == ("system", request_.pk)


def test_beat_escalates_an_expired_request_and_releases_an_idle_claim(
    monkeypatch: pytest.MonkeyPatch, beat: None
) -> None:
    rita = make_user("rita", "reviewer")
    escalating = gate_with_expiry(monkeypatch, Expiry(1, "escalate", to_queue="supervisors"))
    claimed = gate_with_expiry(monkeypatch, None)
    do_claim(claimed.pk, user=rita)
    ApprovalRequest.objects.filter(pk=claimed.pk).update(claim_active_at=timezone.now() - timedelta(hours=1))

    wait_for(
        lambda: ApprovalRequest.objects.filter(pk=escalating.pk, queue="supervisors").exists(),
        timeout=30,
        message="the escalation",
    )
    wait_for(
        lambda: ApprovalRequest.objects.filter(pk=claimed.pk, claimed_by__isnull=True).exists(),
        timeout=30,
        message="the idle claim's release",
    )

    assert ApprovalRequest.objects.get(pk=escalating.pk).status == "pending"
    actions = set(AuditEvent.objects.filter(actor_name="system").values_list("action", flat=True))
    assert actions == {"expiry.escalate", "claim.expire"}
