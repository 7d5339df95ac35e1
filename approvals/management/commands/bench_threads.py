"""Benchmark the thread list at scale: `manage.py bench_threads --threads 100000 --json`.

Creates N synthetic threads (ids prefixed bench-, one stored message each), times the list
queries the Threads page and GET /api/threads run (first page of 50 plus the paginator's
count), then deletes them.
"""

import json
import random
import statistics
import time
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from approvals.thread_selectors import ThreadFilters, filtered_threads
from checkpoints.models import StoredValue, Thread, ThreadStatus

PREFIX = "bench-"
BATCH = 5000


class Command(BaseCommand):
    help = "Time the thread list's queries over N synthetic threads (median of repeated runs)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--threads", type=int, default=100_000)
        parser.add_argument("--repeat", type=int, default=15)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, threads: int, repeat: int, json: bool, **options: Any) -> None:
        Thread.objects.filter(id__startswith=PREFIX).delete()
        started = time.perf_counter()
        _create(threads)
        created_s = time.perf_counter() - started
        try:
            results = {name: _median_ms(query, repeat) for name, query in _queries().items()}
        finally:
            Thread.objects.filter(id__startswith=PREFIX).delete()
        report = {
            "threads": threads,
            "vendor": connection.vendor,
            "insert_s": round(created_s, 2),
            "page_ms_p50": results,
            "target_ms": 50,
        }
        self.stdout.write(_dumps(report) if json else "\n".join(f"{k}: {v}" for k, v in results.items()))


def _create(n: int) -> None:
    rng = random.Random(7)
    statuses = [ThreadStatus.DONE] * 6 + [ThreadStatus.WAITING, ThreadStatus.RUNNING, ThreadStatus.FAILED]
    for start in range(0, n, BATCH):
        Thread.objects.bulk_create(
            Thread(
                id=f"{PREFIX}{i:07d}", agent=rng.choice(["refunds", "outreach"]), status=rng.choice(statuses)
            )
            for i in range(start, min(n, start + BATCH))
        )
    # One stored message per thread, so text search has a conversation to look through: one
    # thread in a hundred mentions a damaged parcel.
    words = ["refund", "order", "late", "invoice", "address", "email", "launch", "discount"]
    for start in range(0, n, BATCH):
        StoredValue.objects.bulk_create(
            StoredValue(
                thread_id=f"{PREFIX}{i:07d}",
                key=rng.randbytes(16),
                run=0,  # the first item of the thread's message list
                depth=0,
                data=json.dumps(
                    {
                        "role": "user",
                        "content": " ".join(rng.choices(words, k=40))
                        + (" the parcel arrived damaged" if i % 100 == 7 else ""),
                    }
                ),
            )
            for i in range(start, min(n, start + BATCH))
        )
    # Spread activity over 90 days (auto_now fields were set to now on insert).
    spread = {
        "postgresql": "now() - random() * interval '90 days'",
        "sqlite": "datetime('now', '-' || abs(random() % 129600) || ' minutes')",
    }[connection.vendor]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Thread._meta.db_table} SET created_at = {spread} WHERE id LIKE %s", [PREFIX + "%"]
        )
        cursor.execute(
            f"UPDATE {Thread._meta.db_table} SET updated_at = created_at WHERE id LIKE %s", [PREFIX + "%"]
        )


def _queries() -> dict[str, Callable[[], Any]]:
    admin = User(username="bench", is_superuser=True, is_active=True)
    week_ago = date.today() - timedelta(days=7)

    def page(**filters: Any) -> Callable[[], Any]:
        rows = filtered_threads(admin, ThreadFilters(**filters))
        return lambda: (list(rows[:50]), rows.count())

    return {
        "all": page(),
        "status": page(status="waiting"),
        "agent_and_status": page(agent="refunds", status="failed"),
        "last_7_days": page(created_after=week_ago),
        "search_id": page(q="0042"),
        "search_text": page(q="parcel arrived damaged"),  # 1 thread in 100
        "search_common_word": page(q="invoice"),  # nearly every thread: the worst case
    }


def _median_ms(query: Callable[[], Any], repeat: int) -> float:
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        query()
        timings.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(timings), 2)


def _dumps(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2)
