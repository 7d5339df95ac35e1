"""Pushes from plain threads (Celery workers) reuse one Redis connection per process, and skip
groups nobody has joined.

asgiref's async_to_sync outside an ASGI server starts an event loop per call, and the Redis
channel layer opens a connection per loop: a connect per step. The real Redis layer here.
"""

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from channels.layers import get_channel_layer
from redis.asyncio.connection import Connection

from approvals import events


def _run(coroutine: Any) -> Any:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()


@pytest.fixture
def watched() -> Iterator[str]:
    """A thread whose page is open: a channel in its group."""
    layer = get_channel_layer()
    assert layer is not None
    group = events.thread_group("watched")
    channel = _run(layer.new_channel())
    _run(layer.group_add(group, channel))
    yield "watched"
    _run(layer.group_discard(group, channel))


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The groups the layer's group_send is called for."""
    groups: list[str] = []
    group_send = type(get_channel_layer()).group_send

    async def counted(self: Any, group: str, message: dict[str, Any]) -> None:
        groups.append(group)
        await group_send(self, group, message)

    monkeypatch.setattr(type(get_channel_layer()), "group_send", counted)
    return groups


def test_sixty_pushes_from_worker_threads_open_a_few_redis_connections_not_sixty(
    monkeypatch: pytest.MonkeyPatch, watched: str, sent: list[str]
) -> None:
    opened: list[object] = []
    connect = Connection._connect

    async def counted(self: Connection) -> None:  # this process's new sockets, not the server's
        opened.append(self)
        await connect(self)

    monkeypatch.setattr(Connection, "_connect", counted)

    def push() -> None:
        for _ in range(20):
            events.on_thread_changed(None, thread_id=watched)

    workers = [threading.Thread(target=push) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert len(sent) == 60  # every push went through the layer...
    assert len(opened) <= 10  # ...on a few connections at once, then reused; was one per push: 60


def test_a_push_to_a_group_nobody_has_joined_never_reaches_the_layer(watched: str, sent: list[str]) -> None:

    events.on_thread_changed(None, thread_id="nobody-looks")
    events.on_thread_changed(None, thread_id=watched)

    assert sent == [events.thread_group(watched)]


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
