"""WebSocket consumers: thin; they join groups the user may see and forward rendered partials."""

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.http import QueryDict
from django.template.loader import render_to_string

from approvals import events, permissions, roles, selectors, thread_access
from approvals.forms import InboxFilterForm
from approvals.selectors import InboxFilter
from checkpoints.models import Thread

log = logging.getLogger(__name__)

UNAUTHENTICATED = 4401
FORBIDDEN = 4403


class InboxConsumer(AsyncWebsocketConsumer):
    """A reviewer's inbox. Any change re-renders this user's own view (their queues, filters and
    claims) from the database, so a push can never leave an item out; bursts are coalesced."""

    COALESCE_S = 0.05
    refresher: "asyncio.Task[None] | None"

    async def connect(self) -> None:
        user = self.scope["user"]
        self.dirty, self.refresher = False, None
        if not user.is_authenticated:
            await self.close(code=UNAUTHENTICATED)
            return
        if not await database_sync_to_async(permissions.has_any_role)(user):
            await self.close(code=FORBIDDEN)
            return
        self.query = QueryDict(self.scope.get("query_string", b"").decode(errors="replace"))
        self.filters = await database_sync_to_async(self._filters)()
        await self.channel_layer.group_add(events.INBOX_GROUP, self.channel_name)
        await self.accept()
        # Catch up from the database: after a reconnect nothing pending is missing from view.
        await self.send(text_data=await database_sync_to_async(self._render)())

    def _filters(self) -> InboxFilter:
        form = InboxFilterForm(self.query, queues=selectors.visible_queues(self.scope["user"]))
        return form.filters() if form.is_valid() else InboxFilter()

    async def disconnect(self, code: int) -> None:
        if self.refresher is not None:
            self.refresher.cancel()
        await self.channel_layer.group_discard(events.INBOX_GROUP, self.channel_name)

    async def inbox_changed(self, event: dict[str, Any]) -> None:
        self.dirty = True
        if self.refresher is None or self.refresher.done():
            self.refresher = asyncio.create_task(self._refresh())

    async def _refresh(self) -> None:
        try:
            while self.dirty:
                await asyncio.sleep(self.COALESCE_S)
                self.dirty = False
                await self.send(text_data=await database_sync_to_async(self._render)())
        except Exception:
            log.exception("inbox refresh failed")

    def _render(self) -> str:
        user = self.scope["user"]
        context = selectors.inbox_context(user, self.filters)
        context.update(oob=True, query=self.query, can_claim=roles.is_reviewer(user))
        return render_to_string("approvals/inbox.html#live", context)


class ThreadConsumer(AsyncWebsocketConsumer):
    """One thread's page (and the decision pages at its gates): status, conversation, closures."""

    async def connect(self) -> None:
        user = self.scope["user"]
        self.thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        self.group = events.thread_group(self.thread_id)
        if not user.is_authenticated:
            await self.close(code=UNAUTHENTICATED)
            return
        if not await database_sync_to_async(self._allowed)(user):
            await self.close(code=FORBIDDEN)
            return
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    def _allowed(self, user: Any) -> bool:
        thread = Thread.objects.filter(pk=self.thread_id).first()
        return thread is not None and thread_access.can_see_thread(user, thread)

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def thread_changed(self, event: dict[str, Any]) -> None:
        await self.send(text_data=await database_sync_to_async(self._render_thread)())

    async def approval_closed(self, event: dict[str, Any]) -> None:
        await self.send(text_data=await database_sync_to_async(self._render_closed)(event["request_id"]))

    def _render_thread(self) -> str:
        try:
            context = selectors.thread_context(self.thread_id)
        except Thread.DoesNotExist:  # deleted since the page opened
            return ""
        return render_to_string("approvals/_thread_live.html", context)

    async def approval_changed(self, event: dict[str, Any]) -> None:
        await self.send(text_data=await database_sync_to_async(self._render_changed)(event["request_id"]))

    def _render_changed(self, request_id: int) -> str:
        """The request's status line (claim, queue, expiry) on its decision page."""
        requests = selectors.requests_by_ids([request_id])
        if not requests:
            return ""
        user = self.scope["user"]
        context = {**selectors.status_context(requests[0], user), "oob": True, "user": user}
        return render_to_string("approvals/decision.html#status", context)

    def _render_closed(self, request_id: int) -> str:
        requests = selectors.requests_by_ids([request_id])
        if not requests:
            return ""
        user = self.scope["user"]
        context = {"item": requests[0], "oob": True, "user": user, **selectors.neighbours(user, requests[0])}
        return render_to_string("approvals/decision.html#panel", context)
