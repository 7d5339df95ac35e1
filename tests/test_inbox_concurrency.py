"""Exactly one decision wins: reviewers race on the same request through the real HTTP API.

Each round opens a fresh gate and fires 2-4 decisions (any mix of approve, edit and reject) at
the same instant from different reviewers against the live web server. Exactly one gets 200; every
other gets 409 naming who decided what; the thread resumes exactly once; the refund happens at
most once (once if the winner approved or edited, never if they rejected).
"""

import random
import threading
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User

from agents.examples.models import Refund
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, AuditEvent
from checkpoints.backends import get_backend
from checkpoints.models import Thread
from tests.factories import make_gate, make_user
from tests.live import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 20
VERBS = {"approve": "approved", "edit": "edited and approved", "reject": "rejected"}


@dataclass(frozen=True)
class Outcome:
    reviewer: str
    body: dict[str, Any]
    status: int
    detail: str


def decision_bodies(rng: random.Random, count: int) -> list[dict[str, Any]]:
    choices: list[dict[str, Any]] = [
        {"decision": "approve"},
        {"decision": "edit", "args": {"order_id": "ORD-1001", "amount_cents": rng.randint(100, 4000)}},
        {"decision": "reject", "message": "Not eligible"},
    ]
    return [rng.choice(choices) for _ in range(count)]


def race(base_url: str, request_id: int, entries: list[tuple[str, str, dict[str, Any]]]) -> list[Outcome]:
    """POST every (reviewer, token, body) at the same moment, each from its own warmed-up connection."""
    barrier = threading.Barrier(len(entries))
    outcomes: list[Outcome] = []

    def fire(reviewer: str, token: str, body: dict[str, Any]) -> None:
        with httpx.Client(
            base_url=base_url, timeout=30, headers={"Authorization": f"Bearer {token}"}
        ) as client:
            client.get("/healthz")  # open the connection before the barrier
            barrier.wait()
            response = client.post(f"/api/approvals/{request_id}/decision", json=body)
        outcomes.append(Outcome(reviewer, body, response.status_code, response.json().get("detail", "")))

    threads = [threading.Thread(target=fire, args=entry) for entry in entries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def check_round(outcomes: list[Outcome]) -> Outcome:
    """Exactly one 200; the rest 409 naming the winner and their decision. Return the winner."""
    statuses = sorted(o.status for o in outcomes)
    assert statuses == [200] + [409] * (len(outcomes) - 1), outcomes
    [winner] = [o for o in outcomes if o.status == 200]
    expected = f"Already {VERBS[winner.body['decision']]} by {winner.reviewer}."
    assert all(o.detail == expected for o in outcomes if o.status == 409), outcomes
    return winner


def check_resumed_once(request_: ApprovalRequest, winner: Outcome) -> None:
    wait_for(
        lambda: Thread.objects.filter(pk=request_.thread_id, status="done").exists(),
        timeout=60,
        message=f"thread {request_.thread_id} to finish",
    )
    thread = Thread.objects.get(pk=request_.thread_id)
    children = [
        c for c in get_backend().list(thread_id=thread.id) if c.parent_id == str(request_.checkpoint_id)
    ]
    assert len(children) == 1, "the thread resumed from the gate more than once"
    refunds = list(Refund.objects.filter(thread_id=thread.id).values_list("amount_cents", flat=True))
    kind = winner.body["decision"]
    assert refunds == (
        [] if kind == "reject" else [4250] if kind == "approve" else [winner.body["args"]["amount_cents"]]
    )
    assert AuditEvent.objects.filter(approval_ref=request_.pk, action__startswith="decision.").count() == 1


def test_concurrent_decisions_exactly_one_wins_every_round(live_server_url: str, celery_worker: Any) -> None:
    reviewers: list[User] = [make_user(f"reviewer{i}", "reviewer") for i in range(4)]
    tokens = {u.username: do_create_token(user=u, name="race") for u in reviewers}
    rng = random.Random(20261122)
    decided: list[tuple[ApprovalRequest, Outcome]] = []

    for _ in range(ROUNDS):
        request_ = make_gate()
        contenders = rng.sample(reviewers, rng.randint(2, 4))
        bodies = decision_bodies(rng, len(contenders))
        entries = [(u.username, tokens[u.username], body) for u, body in zip(contenders, bodies, strict=True)]
        decided.append((request_, check_round(race(live_server_url, request_.pk, entries))))

    for request_, winner in decided:
        check_resumed_once(request_, winner)
    assert Refund.objects.count() == sum(1 for _, w in decided if w.body["decision"] != "reject")
