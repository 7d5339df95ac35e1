"""LangGraph's own client (langgraph-sdk) of the live server, as the /langgraph tests use it.

A test module takes these fixtures by importing them (`from tests.langgraph_clients import
client_fixture  # noqa: F401`): pytest registers each under its `name`, which is what a test's
parameter says, so the imported name never clashes with the parameter (ruff's F811)."""

from collections.abc import Iterator
from typing import Any

import pytest

from tests.live import LiveServices
from tests.test_langgraph_sdk_compat import admins_client, undo_server_client


@pytest.fixture(name="client")
def client_fixture(live_server_url: str, celery_worker: Any) -> Any:
    """An admin's client of the suite's live server, whose worker runs the steps."""
    return admins_client(live_server_url)


@pytest.fixture(name="slow_undo_client")
def slow_undo_client_fixture(live_services: LiveServices, celery_worker: Any) -> Iterator[Any]:
    """An admin's client of a second web server whose decisions wait ten minutes before taking
    effect: a test reads the thread inside the window (and may undo the decision)."""
    with undo_server_client(live_services, undo_s=600) as client:
        yield client
