"""Pushes from plain threads (Celery workers) reuse one Redis connection per process.

asgiref's async_to_sync outside an ASGI server starts an event loop per call, and the Redis
channel layer opens a connection per loop: a connect per step. The real Redis layer here.
"""

import asyncio
import threading

import pytest
from channels.layers import get_channel_layer
from redis.asyncio.connection import Connection

from approvals import events


def test_sixty_pushes_from_worker_threads_open_a_few_redis_connections_not_sixty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened: list[object] = []
    connect = Connection._connect

    async def counted(self: Connection) -> None:  # this process's new sockets, not the server's
        opened.append(self)
        await connect(self)

    monkeypatch.setattr(Connection, "_connect", counted)

    def push(n: int) -> None:
        for m in range(20):
            events.on_thread_changed(None, thread_id=f"t-{n}-{m}")

    workers = [threading.Thread(target=push, args=(n,)) for n in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert len(opened) <= 10  # a few at once, then reused; was one per push: 60


def test_a_push_from_a_worker_thread_reaches_a_member_of_the_group() -> None:
    layer = get_channel_layer()
    assert layer is not None

    async def join() -> str:
        channel = await layer.new_channel()
        await layer.group_add(events.thread_group("pushed"), channel)
        return channel

    async def receive(channel: str) -> dict[str, str]:
        message: dict[str, str] = await asyncio.wait_for(layer.receive(channel), timeout=5)
        await layer.group_discard(events.thread_group("pushed"), channel)
        return message

    loop = asyncio.new_event_loop()
    try:
        channel = loop.run_until_complete(join())
        thread = threading.Thread(
            target=events.on_thread_changed,
            args=(None,),
            kwargs={"thread_id": "pushed"},
        )
        thread.start()
        thread.join()
        message = loop.run_until_complete(receive(channel))
    finally:
        loop.close()
    assert message == {"type": "thread.changed", "thread_id": "pushed"}
