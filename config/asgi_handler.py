"""Django's ASGI handler with fewer thread hops and no new thread per request.

Django builds the middleware chain for async, so each sync middleware hook and the view is
adapted on its own: a hop between the event loop and the request's thread for every one
(and, below a sync-only middleware, one back to the loop). Every view here is sync and reads
the database, so the chain is built sync and entered once.

Django also gives each request a thread of its own (asgiref's ThreadSensitiveContext), started
for it and joined by yet another thread when it ends. Here a request borrows an idle
single-thread executor instead, so a thread serves one request at a time, as under WSGI.
Streaming responses (async iterators too) are sent by Django's handler as before.
"""

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import django
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponseBase

IDLE_THREADS = 32  # kept after a burst; more are started while requests need them


class RequestExecutor(ThreadPoolExecutor):
    """One thread, running one request's sync calls in order."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="request")
        self._last: Future[Any] | None = None

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self._last = super().submit(fn, *args, **kwargs)
        return self._last

    def idle(self) -> bool:
        # asgiref lets a cancelled request's sync call finish before the request ends; this
        # keeps a call that outlived its request from delaying the next one all the same.
        return self._last is None or self._last.done()


class SyncChainASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self._idle: list[RequestExecutor] = []  # touched only on the event loop's thread

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self._idle.pop() if self._idle else RequestExecutor()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            if executor.idle() and len(self._idle) < IDLE_THREADS:
                self._idle.append(executor)
            else:
                executor.shutdown(wait=False)  # its thread ends after the call it is running


def get_asgi_application() -> SyncChainASGIHandler:
    django.setup(set_prefix=False)
    return SyncChainASGIHandler()
