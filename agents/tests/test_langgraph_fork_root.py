"""A fork from a LangGraph thread's start runs from LangGraph's first checkpoint; if that
checkpoint is gone (deleted outside retention, which keeps it), the step fails saying so rather
than running on from the latest LangGraph state, another branch's end."""

from typing import Any

import pytest

from agents.actions.control import do_fork
from agents.registry import registry
from approvals.tests.helpers import steps_sent
from approvals.tests.test_run_again_warnings import (  # noqa: F401  (fixtures)
    no_connection_left_behind,
    offline_url,
    refunded_to_the_end,
    run_until_it_stops,
)
from checkpoints.models import Checkpoint, LangGraphCheckpoint, ThreadStatus

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_fork_from_the_start_whose_first_langgraph_checkpoint_is_gone_fails_saying_so(
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
    offline_url: str,  # noqa: F811  (the fixture)
) -> None:
    settings.DECISION_UNDO_S, settings.OPENAI_BASE_URL = 0, offline_url
    steps_sent(monkeypatch)
    thread_id = refunded_to_the_end("refunds_langgraph")
    root = registry.get("refunds_langgraph")._root(thread_id)  # type: ignore[attr-defined]
    LangGraphCheckpoint.objects.filter(thread_id=thread_id, checkpoint_id=root).delete()
    first = Checkpoint.objects.get(thread_id=thread_id, step=0)

    do_fork(thread_id, checkpoint_id=str(first.pk), values=None, actor="user:olga")
    end = run_until_it_stops(thread_id)

    assert end.status == ThreadStatus.FAILED
    assert "first checkpoint" in end.error
