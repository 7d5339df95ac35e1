"""The Celery broker's Redis channels reuse one client (config/broker.py) and still deliver."""

import threading
from typing import Any

from celery.backends.base import DisabledBackend
from kombu import Connection

from config.celery import app


def test_a_channel_sends_every_command_through_one_client_and_messages_still_arrive(redis_ready: str) -> None:
    assert app.conf.broker_transport == "config.broker:Transport"
    with Connection(redis_ready, transport=app.conf.broker_transport) as connection:
        queue = connection.SimpleQueue("test-broker-client")
        channel: Any = queue.channel  # config.broker.Channel (kombu's stubs know the base only)
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as again:
            assert first is again

        for n in range(3):
            queue.put({"n": n})
        received = [queue.get(timeout=5) for _ in range(3)]
        for message in received:
            message.ack()  # acks go through the same client
        assert [m.payload["n"] for m in received] == [0, 1, 2]
        with channel.conn_or_acquire() as client:
            assert client is first
            # Every ack landed (the hash is the whole Redis db's: other tests' workers share it).
            assert not [m for m in received if client.hexists(channel.unacked_key, m.delivery_tag)]

        # After a fork the channel's pools are dropped: a new client for the new pool.
        channel._after_fork()
        queue.put({"n": 3})
        message = queue.get(timeout=5)
        message.ack()
        assert message.payload == {"n": 3}
        with channel.conn_or_acquire() as client:
            assert client is not first and client.connection_pool is channel.pool
        queue.clear()
        queue.close()


def test_the_result_backend_keeps_nothing_and_is_built_once_per_process_not_per_thread() -> None:
    # Django's ASGI handler runs every request in a new thread; each enqueue from one used to build a backend.
    seen: list[Any] = []
    threads = [threading.Thread(target=lambda: seen.append(app.backend)) for _ in range(3)]
    for thread in threads:
        thread.start()
        thread.join()

    assert isinstance(app.backend, DisabledBackend)
    assert all(backend is app.backend for backend in seen)
