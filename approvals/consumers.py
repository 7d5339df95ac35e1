"""WebSocket consumers: thin; they join groups the user may see and forward rendered partials."""

import asyncio
import contextlib
import logging
from importlib import import_module
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, QueryDict
from django.template.loader import render_to_string

from approvals import decision_page, events, inbox_push, selectors, thread_selectors
from approvals.access import Access
from approvals.actions.decisions import access_request
from approvals.conversation import NoSuchMessages
from approvals.forms import InboxFilterForm
from approvals.live_groups import keep_joined
from approvals.models import ApprovalRequest
from approvals.selectors import InboxFilter
from checkpoints import selectors as checkpoint_selectors
from checkpoints.backends.base import CheckpointError
from checkpoints.models import Thread

log = logging.getLogger(__name__)

UNAUTHENTICATED = 4401
FORBIDDEN = 4403


class RejoiningConsumer(AsyncWebsocketConsumer):
    """A consumer that stays in its groups however Redis loses them (see approvals.live_groups)."""

    keeper: "asyncio.Task[None] | None" = None

    async def join(self, *groups: str) -> None:
        """Join groups now and keep re-joining them while the socket is open."""
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
        layer, channel = self.channel_layer, self.channel_name
        keeper = keep_joined(
            layer, groups=list(groups), channel=channel, resync=self.resync, refresh=self.refresh
        )
        self.keeper = asyncio.create_task(keeper)

    async def send(
        self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False
    ) -> None:
        """Send, unless the page has gone: an update rendered while its socket closed is dropped.
        A send on a closed socket raises an OSError (the ASGI spec's rule; uvicorn's
        ClientDisconnected), and the disconnect that follows stops the consumer."""
        try:
            await super().send(text_data=text_data, bytes_data=bytes_data, close=close)
        except OSError:
            log.debug("dropped an update for a socket that closed")

    def stop_rejoining(self) -> None:
        if self.keeper is not None:
            self.keeper.cancel()

    async def resync(self) -> None:
        """Re-render from the database what pushes missed while the socket was out of its groups."""
        raise NotImplementedError("subclasses of RejoiningConsumer must implement resync()")

    async def refresh(self) -> bool:
        """Once a rejoin period: is the socket's user still allowed it? A logout, a deactivation,
        a password change or a lost role or queue since it opened closes it, as the page's next
        load would refuse it. Subclasses re-read what else they keep about the user."""
        user = await database_sync_to_async(current_user)(self.scope)
        if not await self.admitted(user):
            return False
        self.scope["user"] = user
        return True

    async def admitted(self, user: Any) -> bool:
        """Whether the user may have this socket; if not, close it saying why (4401, 4403)."""
        if user.is_authenticated and await database_sync_to_async(self.allowed)(user):
            return True
        # A socket whose client went first raises (uvicorn's ClientDisconnected): either way it
        # is done, and nothing re-joins it again.
        with contextlib.suppress(OSError):
            await self.close(code=FORBIDDEN if user.is_authenticated else UNAUTHENTICATED)
        return False

    def allowed(self, user: Any) -> bool:
        """Whether an authenticated user may have this socket (one query or a few)."""
        raise NotImplementedError("subclasses of RejoiningConsumer must implement allowed()")


def current_user(scope: dict[str, Any]) -> Any:
    """The socket's user as the session and the database have it now (Django's own check, as on
    each request: anonymous once logged out, deactivated, or after a password change)."""
    session = scope.get("session")
    key = getattr(session, "session_key", None)
    if key is None:  # a socket opened without a session: its user as loaded, read again
        user = scope["user"]
        if not user.is_authenticated:
            return user
        fresh = type(user)._default_manager.filter(pk=user.pk, is_active=True).first()
        return fresh if fresh is not None else AnonymousUser()
    request = HttpRequest()
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(key)
    return get_user(request)


class InboxConsumer(RejoiningConsumer):
    """A reviewer's inbox. Connect and resync render this user's whole view from the database; an
    event for queues the user cannot see costs nothing, and one they can see sends only the changed
    rows and the counts (approvals.inbox_push). Full re-renders are coalesced."""

    COALESCE_S = 0.05
    refresher: "asyncio.Task[None] | None"
    view: inbox_push.InboxView

    async def connect(self) -> None:
        user = self.scope["user"]
        self.dirty, self.refresher = False, None
        if not await self.admitted(user):
            return
        self.query = QueryDict(self.scope.get("query_string", b"").decode(errors="replace"))
        # The rights just read for the role check serve the first view too.
        self.view = await database_sync_to_async(lambda: self._view(fresh=False))()
        await self.join(events.INBOX_GROUP)
        await self.accept()
        # Catch up from the database: after a reconnect nothing pending is missing from view.
        await self.send(text_data=await database_sync_to_async(self._render)())

    def allowed(self, user: Any) -> bool:
        return Access.of(user).has_any_role

    def _viewer(self, *, fresh: bool = True) -> inbox_push.Viewer:
        user = self.scope["user"]
        access = Access.of(user, fresh=fresh)  # each rejoin re-reads the user's rights
        visible = set(access.visible_queues(selectors.known_queues()))
        return inbox_push.Viewer(
            user,
            set(access.closed_queues),
            visible,
            can_claim=access.is_reviewer,
            can_read_ledger=access.can_read_ledger,
        )

    def _view(self, *, fresh: bool = True) -> inbox_push.InboxView:
        viewer = self._viewer(fresh=fresh)
        form = InboxFilterForm(self.query, queues=sorted(viewer.visible))
        filters = form.filters() if form.is_valid() else InboxFilter()
        return inbox_push.InboxView(viewer=viewer, filters=filters, query=self.query)

    async def disconnect(self, code: int) -> None:
        self.stop_rejoining()
        if self.refresher is not None:
            self.refresher.cancel()
        await self.channel_layer.group_discard(events.INBOX_GROUP, self.channel_name)

    async def resync(self) -> None:
        self._full_refresh()

    async def refresh(self) -> bool:
        """Queue rights change rarely: re-read them each rejoin, re-render if they did."""
        if not await super().refresh():
            return False
        # The user was read afresh just now, and its rights with it.
        viewer = await database_sync_to_async(lambda: self._viewer(fresh=False))()
        if viewer != self.view.viewer:
            self.view = await database_sync_to_async(lambda: self._view(fresh=False))()
            self._full_refresh()
        return True

    async def inbox_changed(self, event: dict[str, Any]) -> None:
        queues = set(event.get("queues", []))
        if not queues or all(q in self.view.viewer.closed for q in queues):
            return  # nothing this user may see: no query, nothing sent
        request_ids = event.get("request_ids")
        if (
            not self.view.complete
            or request_ids is None
            or (self.refresher is not None and not self.refresher.done())
        ):
            self._full_refresh()
            return
        swaps = await database_sync_to_async(self._swaps)(event["event"], request_ids, queues)
        if swaps is None:
            self._full_refresh()
        elif swaps:
            await self.send(text_data=swaps)

    def _swaps(self, event_id: str, request_ids: list[int], queues: set[str]) -> str | None:
        known = self.view.viewer.visible | self.view.viewer.closed
        if not queues <= known:  # a queue new since connect: learn whether this user may see it
            self.view.viewer = self._viewer()
            self.view.viewer.visible |= queues - self.view.viewer.closed
            if queues <= self.view.viewer.closed:
                return ""
        change = inbox_push.change_for(event_id=event_id, request_ids=request_ids)
        return self.view.apply(change, request_ids)

    def _full_refresh(self) -> None:
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
        user, view = self.scope["user"], self.view
        context = selectors.inbox_context(user, view.filters)
        was = view.order
        view.reset(context["items"], total=context["count"])
        context.update(oob=True, query=self.query, can_claim=view.viewer.can_claim)
        html = render_to_string("approvals/inbox.html#live", context)
        # A screen reader hears why rows left and which came back, as after a row's own push.
        return html + view.changes_html(was=was, items=context["items"])

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The rows a (re)connecting page showed: it is told why those no longer listed left."""
        shown = inbox_push.shown_rows(text_data)
        gone = [pk for pk in shown if pk not in self.view.order]
        said = await database_sync_to_async(self.view.gone_html)(gone, named_by_page=True) if gone else ""
        if said:  # nothing at all for rows the reviewer may not see, or that never were
            await self.send(text_data=said)


class ThreadConsumer(RejoiningConsumer):
    """One thread's page, or the decision page of one of its requests (`?request=<pk>`): each
    receives only what it shows. A decision page gets its request's panel or status line and
    the thread's conversation; never another request's panel (it has no element for it)."""

    async def connect(self) -> None:
        user = self.scope["user"]
        self.thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        self.group = events.thread_group(self.thread_id)
        query = QueryDict(self.scope.get("query_string", b"").decode(errors="replace"))
        # The thread page also shows the history and the operator's buttons; decision pages do not.
        self.whole_page = query.get("view") == "thread"
        # The page of the history the thread page shows (an older one: ?history_before=).
        self.history_before = query.get("history_before", "")[:64] or None
        # And the page of the conversation (an earlier one: ?messages_before=), pushed as it is.
        self.messages_before = query.get("messages_before", "")[:16] or None
        raw = query.get("request", "")
        # ASCII digits only ("²" is a digit int() refuses), and few: a request id fits a bigint.
        whole = raw.isascii() and raw.isdecimal() and len(raw) < 12
        self.request_id = int(raw) if whole and not self.whole_page else None
        # The panel the page shows (decision_page.panel_mark): pushes replace it only when it differs.
        self.panel_mark = query.get("panel", "")
        if not await self.admitted(user):
            return
        await self.join(self.group)
        await self.accept()
        # Catch up from the database: what a reconnecting page missed while its socket was down.
        await self.resync()

    def allowed(self, user: Any) -> bool:
        return checkpoint_selectors.thread_exists(self.thread_id) and Access.of(user).can_see_thread(
            self.thread_id
        )

    async def disconnect(self, code: int) -> None:
        self.stop_rejoining()
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def resync(self) -> None:
        """The page as the database has it: the thread's side, or the request's column and panel."""
        await self._push(with_status=True)

    async def thread_changed(self, event: dict[str, Any]) -> None:
        await self._push(with_status=False)  # a pause or resume changes a decided request's panel

    async def approval_closed(self, event: dict[str, Any]) -> None:
        # Any request's decision changes the conversation's tags; only this page's has its panel.
        await self._push(with_status=False)

    async def approval_changed(self, event: dict[str, Any]) -> None:
        if event.get("request_id") == self.request_id:
            await self._push(with_status=True)

    async def thread_deleted(self, event: dict[str, Any]) -> None:
        """Say who deleted the thread where the panel or the operator's buttons were, then close
        normally (1000: the page does not reconnect; a reload answers 404)."""
        self.stop_rejoining()
        context = {"deleted_by": event.get("deleted_by", ""), "request_id": self.request_id}
        await self.send(text_data=render_to_string("approvals/_thread_deleted.html", context))
        with contextlib.suppress(OSError):  # the page may have closed first
            await self.close(code=1000)

    async def _push(self, *, with_status: bool) -> None:
        html = await database_sync_to_async(self._render)(with_status=with_status)
        if html:
            await self.send(text_data=html)

    def _render(self, *, with_status: bool) -> str:
        if self.request_id is None:
            return self._render_thread()
        try:
            item = access_request(user=self.scope["user"], request_id=self.request_id)
        except ApprovalRequest.DoesNotExist:  # deleted, or moved to a queue this user cannot see
            return ""
        if item.thread_id != self.thread_id:
            return ""
        return self._render_decision(item, with_status=with_status)

    def _render_thread(self) -> str:
        try:
            context = self._conversation()
        except Thread.DoesNotExist:  # deleted since the page opened
            return ""
        if self.whole_page:
            context.update(self._side(context["thread"]))  # its pager keeps the history's page
            context["announce_status"] = True  # the thread page reads its status changes out
        html = render_to_string("approvals/_thread_live.html", context)
        if self.whole_page:
            html += render_to_string("approvals/_thread_side.html", context)
        return html

    def _conversation(self) -> dict[str, Any]:
        """The thread at the page of its conversation the page shows (the newest if the head no
        longer has it: an edit or a fork shortened the conversation)."""
        if self.whole_page:
            try:
                return selectors.thread_context(self.thread_id, messages_before=self.messages_before)
            except NoSuchMessages:
                pass
        return selectors.thread_context(self.thread_id)

    def _side(self, thread: Thread) -> dict[str, Any]:
        """The thread page's side, its history at the page it shows (the newest page if that
        page's checkpoint is gone: pruned, or never the thread's)."""
        user = self.scope["user"]
        try:
            return thread_selectors.side_context(thread, user, history_before=self.history_before)
        except CheckpointError:
            return thread_selectors.side_context(thread, user)

    def _render_decision(self, item: ApprovalRequest, *, with_status: bool) -> str:
        """The thread's conversation; the panel if what it shows changed, else its status line.
        Only a changed panel needs the whole page's context (its neighbours, the checkpoint as
        asked, the effects): most pushes are a step's, and send the conversation alone."""
        user = self.scope["user"]
        try:
            decider = {"item": item, **decision_page.decider_context(item, user=user)}
            mark = decision_page.panel_mark(decider)
            if mark != self.panel_mark:
                context = {**decision_page.decision_context(item, user=user), "oob": True}
            else:
                context = {**selectors.thread_context(item.thread_id, side_requests=False), "oob": True}
        except Thread.DoesNotExist:
            return ""
        # The thread as it is now, where the page shows it: pushes never swap the column's layout
        # (a reload shows the conversation when asked first), so nothing moves under the reader.
        html = render_to_string("approvals/_thread_live.html", context)
        if mark != self.panel_mark:
            self.panel_mark = mark
            html += render_to_string("approvals/decision.html#panel", context)
        elif with_status and item.is_pending:
            html += render_to_string("approvals/decision.html#status", self._status(item, decider, mark))
        return html

    def _status(self, item: ApprovalRequest, decider: dict[str, Any], mark: str) -> dict[str, Any]:
        """What the status line needs, as decision_page.decision_context has it."""
        context = {**selectors.status_context(item, self.scope["user"]), **decider}
        context["can_claim"] = decision_page.may_claim(context["can_claim"], decider)
        return {**context, "user": self.scope["user"], "panel_mark": mark, "oob": True}
