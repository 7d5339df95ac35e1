"""Keep an open socket in its channel-layer groups, and say when it had been dropped from them.

Redis holds group membership only: a FLUSHALL, a failover, an eviction or channels-redis's group
expiry (24 h) drops every socket from its groups while the sockets stay open, and pushes then
reach nobody. Each consumer re-joins every `LIVE_REJOIN_S`; when it had been dropped, it
re-renders from the database whatever it may have missed meanwhile.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

log = logging.getLogger(__name__)


async def rejoin(layer: Any, *, group: str, channel: str) -> bool:
    """Add channel to group again (refreshing its expiry); True if it was not a member any more."""
    connection_for = getattr(layer, "connection", None)
    group_key = getattr(layer, "_group_key", None)
    if connection_for is not None and group_key is not None and hasattr(layer, "group_expiry"):
        # channels-redis: its own group_add, but ZADD's answer says whether the member is new.
        connection = connection_for(layer.consistent_hash(group))
        added = await connection.zadd(group_key(group), {channel: time.time()})
        await connection.expire(group_key(group), layer.group_expiry)
        return bool(added)
    groups = getattr(layer, "groups", None)
    was_member = isinstance(groups, dict) and channel in groups.get(group, {})
    await layer.group_add(group, channel)
    return not was_member  # an unknown layer: assume the worst, and resync


async def keep_joined(
    layer: Any,
    *,
    groups: list[str],
    channel: str,
    resync: Callable[[], Awaitable[None]],
    refresh: Callable[[], Awaitable[bool]] | None = None,
) -> None:
    """Re-join groups every LIVE_REJOIN_S until cancelled; call resync after any was lost, and
    refresh (if given) every time: it answers False when the socket is closing (its user lost the
    right to it), and then nothing is joined again."""
    while True:
        await asyncio.sleep(settings.LIVE_REJOIN_S)
        try:
            if refresh is not None and not await refresh():
                return
            lost = [group for group in groups if await rejoin(layer, group=group, channel=channel)]
            if lost:
                log.warning("socket %s re-joined %s after losing it; re-rendering", channel, ", ".join(lost))
                await resync()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # Redis away: the socket closes by itself; try again next time
            log.warning("socket %s could not re-join %s: %r", channel, ", ".join(groups), exc)
