"""A worker whose policies are cached applies a policy saved since at its next gate, whatever
Redis did meanwhile: the cache is keyed by the policies' generation in Postgres, written in the
change's own transaction. (It was keyed by a version in Redis: a bump lost while Redis was away,
its retrier gone with the process that made the change, or a Redis restored with an old version,
left every warm worker routing and counting approvers by the policies it had cached.)

A real worker process (one, so its cache is the one warmed) and the real Redis."""

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping

import pytest
import redis
from django.conf import settings

from approvals.actions.policies import do_create_policy
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.live import LiveServices, Workers, reach, start_thread

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

OLD_VERSION_KEY = "gatehouse:policies:version"  # where Redis kept the policies' version
ROUTE = {"name": "refunds to finance", "tool": "issue_refund", "action": "route", "queue": "finance"}
REQUIRE = {"name": "two approvers", "tool": "issue_refund", "action": "require", "approvers": 2}


@pytest.fixture
def warm_worker(workers: Workers) -> Iterator[None]:
    """One worker process that opened a gate, so it caches the tool's (no) policies."""
    workers.start("policy-cache", {}, concurrency=1)
    first = gate_of(start_thread("Please refund order ORD-1001"))
    assert (first.queue, first.policy_name, first.required_approvals) == ("refunds", "", 1)
    yield


def gate_of(thread_id: str) -> ApprovalRequest:
    reach(thread_id, "waiting")
    return ApprovalRequest.objects.get(thread_id=thread_id, status=ApprovalStatus.PENDING)


def create_in_a_process_without_redis(live_services: LiveServices, fields: Mapping[str, object]) -> None:
    """Save a policy from another process that cannot reach Redis and then exits (anything it
    would retry in the background dies with it)."""
    env = {**live_services.env, "REDIS_URL": "redis://127.0.0.1:1/0"}
    code = (
        "from approvals.actions.policies import do_create_policy; "
        f"do_create_policy(actor=None, fields={dict(fields)!r})"
    )
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        env=env,
        cwd=os.fspath(settings.BASE_DIR),
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_a_route_saved_while_redis_is_unreachable_applies_at_a_warm_workers_next_gate(
    warm_worker: None, live_services: LiveServices
) -> None:
    create_in_a_process_without_redis(live_services, ROUTE)

    second = gate_of(start_thread("Please refund order ORD-1002"))

    assert (second.queue, second.policy_name) == ("finance", "refunds to finance")


def test_a_redis_restored_with_an_old_version_does_not_revive_a_warm_workers_policies(
    warm_worker: None,
) -> None:
    client = redis.Redis.from_url(settings.REDIS_URL)
    before: bytes | None = client.get(OLD_VERSION_KEY)  # type: ignore[assignment]  # (sync client)
    do_create_policy(actor=None, fields=REQUIRE)
    if before is None:  # as restored from a snapshot taken before the change
        client.delete(OLD_VERSION_KEY)
    else:
        client.set(OLD_VERSION_KEY, before)

    second = gate_of(start_thread("Please refund order ORD-1002"))

    assert (second.required_approvals, second.policy_name) == (2, "two approvers")
