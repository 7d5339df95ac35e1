"""Open pages keep receiving pushes after Redis loses their sockets' group membership.

A FLUSHDB of the test Redis db (the channel layer's db) drops every socket from its groups while
the sockets stay open; so does channels-redis's group expiry for a tab open longer than a day.
Each socket re-joins every LIVE_REJOIN_S (5 s here) and re-renders what it missed. Real uvicorn,
real Redis channel layer.
"""

import asyncio
import time
from typing import Any

import pytest
import redis
import websockets
from django.conf import settings
from django.contrib.auth.models import User

from approvals import decision_page
from approvals.actions.decisions import check_decision, do_decide
from approvals.events import INBOX_GROUP
from tests.factories import make_gate, make_user
from tests.test_inbox_live import connect, cookie_for, in_thread, row, until

pytestmark = pytest.mark.django_db(transaction=True)

BOUND_S = settings.LIVE_REJOIN_S + 4  # one re-join period, then a render


def flush_redis() -> None:
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.flushdb()
    client.close()


def age_group_members(group: str, *, seconds: int) -> int:
    """Backdate every member of a channel-layer group, as if each had joined `seconds` ago."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    layers: Any = settings.CHANNEL_LAYERS
    key = f"{layers['default']['CONFIG']['prefix']}:group:{group}"
    members: list[bytes] = client.zrange(key, 0, -1)  # type: ignore[assignment]
    for member in members:
        client.zadd(key, {member: time.time() - seconds}, xx=True)
    client.close()
    return len(members)


def test_an_open_inbox_receives_new_items_after_redis_is_flushed(live_server_url: str) -> None:
    cookie = cookie_for("rita", "reviewer")

    async def scenario() -> None:
        async with await connect(live_server_url, cookie) as ws:
            await until(ws, lambda m: 'id="inbox-list"' in m)
            await in_thread(flush_redis)()
            request_ = await in_thread(make_gate)()
            await until(ws, lambda m: row(request_) in m, timeout=BOUND_S)

    asyncio.run(scenario())


def test_an_inbox_open_longer_than_the_group_expiry_still_receives_new_items(live_server_url: str) -> None:
    cookie = cookie_for("rita", "reviewer")

    async def scenario() -> None:
        async with await connect(live_server_url, cookie) as ws:
            await until(ws, lambda m: 'id="inbox-list"' in m)
            assert await in_thread(lambda: age_group_members(INBOX_GROUP, seconds=2 * 86400))() >= 1
            await asyncio.sleep(BOUND_S)  # a re-join refreshes the membership's age
            request_ = await in_thread(make_gate)()
            await until(ws, lambda m: row(request_) in m, timeout=2)

    asyncio.run(scenario())


def test_an_open_decision_page_learns_of_a_decision_made_after_redis_is_flushed(live_server_url: str) -> None:
    cookie = cookie_for("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    request_ = make_gate()
    # As the decision page connects: its request, and the mark of the panel it shows.
    mark = decision_page.decision_context(request_, user=User.objects.get(username="rita"))["panel_mark"]
    query = f"?request={request_.pk}&panel={mark}"

    async def scenario() -> str:
        url = live_server_url.replace("http://", "ws://") + f"/ws/threads/{request_.thread_id}/{query}"
        headers: Any = {"Cookie": f"sessionid={cookie}"}
        async with websockets.connect(url, additional_headers=headers, origin=live_server_url) as ws:  # type: ignore[arg-type]
            await asyncio.sleep(0.2)  # accepted and joined
            await in_thread(flush_redis)()
            await in_thread(
                lambda: do_decide(
                    request_, reviewer=sam, valid=check_decision(request_, user=sam, decision="approve")
                )
            )()
            return await until(ws, lambda m: f'id="decision-panel-{request_.pk}"' in m, timeout=BOUND_S)

    assert "sam" in asyncio.run(scenario())
