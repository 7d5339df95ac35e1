"""Celery's Redis transport, with one Redis client per channel instead of one per command.

kombu's Redis channel builds a new `redis.Redis` for every publish and every ack
(`conn_or_acquire`), and building one (its response-callback tables) costs more CPU than the
command it sends: about a quarter of a step task's publish. A client holds no connection of its
own (each command borrows one from the channel's pool and gives it back), so one client per
channel serves every call, from any thread, as the pool does."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis


class Channel(redis.Channel):
    _shared_client: Any = None
    _shared_client_pool: Any = None

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        if client:
            yield client
            return
        pool = self.pool  # a new one after a fork or a reconnect: then a new client for it
        if self._shared_client is None or self._shared_client_pool is not pool:
            self._shared_client, self._shared_client_pool = self._create_client(), pool  # type: ignore[attr-defined]
        yield self._shared_client


class Transport(redis.Transport):
    Channel = Channel
