"""The database work of a push does not grow with the number of open inboxes.

A web server of its own counts its queries (config.query_count); reviewers' sockets connect to it and
gates open. Real uvicorn, real Redis channel layer.
"""

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config import query_count
from tests.factories import make_gate
from tests.live import LiveServices, free_port
from tests.test_inbox_live import EMAIL, cookie_for, in_thread, row, until

pytestmark = pytest.mark.django_db(transaction=True)

SETTLE_S = 0.5  # after the last socket got the row, for any straggling query to be counted


@pytest.fixture
def counted(live_services: LiveServices, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A web server counting its queries into a file; no periodic refresh during the test."""
    path, port = tmp_path / "queries", free_port()
    process = live_services.start_web(port, extra_env={"QUERY_COUNT_FILE": str(path), "LIVE_REJOIN_S": "300"})
    yield f"http://127.0.0.1:{port}", path
    live_services.stop(process)


async def open_inboxes(url: str, cookie: str, n: int) -> list[Any]:
    from tests.test_inbox_live import connect

    sockets = [await connect(url, cookie) for _ in range(n)]
    for ws in sockets:
        await until(ws, lambda m: 'id="inbox-list"' in m, timeout=10)
    return sockets


async def queries_for_a_gate(url: str, path: Path, *, watchers: list[Any], **gate: Any) -> int:
    """Queries the web server ran while a new gate reached every watcher."""
    before = query_count.read(str(path))
    request_ = await in_thread(lambda: make_gate(**gate))()
    for ws in watchers:
        await until(ws, lambda m: row(request_) in m, timeout=5)
    await asyncio.sleep(SETTLE_S)
    return query_count.read(str(path)) - before


def test_queries_per_gate_do_not_grow_with_the_number_of_open_inboxes(counted: tuple[str, Path]) -> None:
    url, path = counted
    cookie = cookie_for("rita", "reviewer")

    async def scenario() -> tuple[int, int]:
        one = await open_inboxes(url, cookie, 1)
        with_one = await queries_for_a_gate(url, path, watchers=one)
        ten = one + await open_inboxes(url, cookie, 9)
        with_ten = await queries_for_a_gate(url, path, watchers=ten)
        for ws in ten:
            await ws.close()
        return with_one, with_ten

    with_one, with_ten = asyncio.run(scenario())
    assert 0 < with_one <= 6
    assert with_ten == with_one


def test_an_inbox_that_cannot_see_the_queue_runs_no_query_and_receives_nothing(
    counted: tuple[str, Path],
) -> None:
    url, path = counted
    cookie_for("rita", "reviewer", queues=("refunds",))
    sam = cookie_for("sam", "reviewer", queues=("outreach",))
    outreach: dict[str, Any] = {"agent": "outreach", "action": "send_email", "args": EMAIL}

    async def scenario() -> tuple[int, int, list[str]]:
        sockets = await open_inboxes(url, sam, 5)
        alone = await queries_for_a_gate(url, path, watchers=sockets, **outreach)
        before = query_count.read(str(path))
        refund = await in_thread(make_gate)()  # sam may not see the refunds queue
        await asyncio.sleep(0.3)  # its event handled apart from the next one
        email = await in_thread(lambda: make_gate(**outreach))()
        # Each socket handles events in order: its first push after the refund's is the email's.
        firsts = [str(await asyncio.wait_for(ws.recv(), 5)) for ws in sockets]
        await asyncio.sleep(SETTLE_S)
        both = query_count.read(str(path)) - before
        for ws in sockets:
            await ws.close()
        assert all(row(email) in m and row(refund) not in m for m in firsts)
        return alone, both, firsts

    alone, both, _ = asyncio.run(scenario())
    assert both == alone  # the refund's event cost sam's five sockets no query
