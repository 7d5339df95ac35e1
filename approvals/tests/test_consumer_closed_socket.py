"""An update rendered while its page closed is dropped, not logged as a failure: under uvicorn a
send on a closed WebSocket raises ClientDisconnected (an OSError, as the ASGI spec asks)."""

import asyncio
import logging
from typing import Any

import pytest

from approvals.consumers import InboxConsumer


async def closed_socket(message: dict[str, Any]) -> None:
    raise OSError("the client went away")  # uvicorn's ClientDisconnected subclasses OSError


def test_an_inbox_refresh_for_a_page_that_closed_is_dropped_quietly(caplog: pytest.LogCaptureFixture) -> None:
    consumer = InboxConsumer()
    consumer.base_send = closed_socket
    consumer.COALESCE_S = 0
    consumer.dirty = True
    consumer._render = lambda: "<div id='inbox-live'></div>"  # type: ignore[method-assign]

    with caplog.at_level(logging.ERROR):
        asyncio.run(consumer._refresh())

    assert not consumer.dirty  # it did render and try to send
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_a_send_on_a_closed_socket_does_not_raise() -> None:
    consumer = InboxConsumer()
    consumer.base_send = closed_socket

    asyncio.run(consumer.send(text_data="<div></div>"))
