"""pydantic-ai runs side by side in one thread-pool worker: the example's model is built at
import, its async HTTP client shared by every step, so each step running on a loop of its own
thread made some fail ("bound to a different event loop"). Real processes: a Celery worker
with a thread pool, Redis, the test database and the offline model served by uvicorn."""

import pytest

from checkpoints.models import Thread
from tests.live import Workers, start_thread, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

AGENT = "refunds_pydantic_ai"


def test_concurrent_pydantic_ai_runs_in_one_worker_all_reach_their_gate(workers: Workers) -> None:
    # A delay at the model keeps the steps in flight together, on one shared client.
    workers.start("threads", {"OFFLINE_MODEL_DELAY_MS": "300"}, 8, pool="threads")
    ids = [start_thread(f"Please refund order ORD-100{1 + n % 4}", agent=AGENT) for n in range(6)]

    wait_for(
        lambda: not Thread.objects.filter(pk__in=ids, status__in=["running"]).exists(),
        timeout=60,
        message="six pydantic-ai threads to stop running",
    )
    statuses = dict(Thread.objects.filter(pk__in=ids).values_list("pk", "status"))
    assert statuses == {thread_id: "waiting" for thread_id in ids}, [
        (t.pk, t.error) for t in Thread.objects.filter(pk__in=ids).exclude(status="waiting")
    ]
