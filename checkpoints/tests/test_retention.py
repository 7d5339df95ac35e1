"""Retention as operators run it: agents' policies, protection, the command and the beat task."""

from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from checkpoints.backends import get_backend
from checkpoints.retention import Override, prune_all
from checkpoints.signals import protect_checkpoints
from checkpoints.store import store_for
from checkpoints.tasks import prune_checkpoints_task
from checkpoints.tests.helpers import THREAD, conversation, ids, put_after, start

POLICIES = {"refunds": Override(keep_last=2), "outreach": Override()}


def policies(agent: str) -> Override | None:
    return POLICIES.get(agent)


@pytest.fixture(autouse=True)
def policy_source(settings: Any) -> None:
    settings.CHECKPOINT_RETENTION_SOURCE = "checkpoints.tests.test_retention.policies"


def outreach_thread(steps: int) -> None:
    _, head = start(get_backend(), "thread-2", agent="outreach")
    for _ in range(steps):
        head = put_after(get_backend(), head)


@pytest.mark.django_db
def test_prune_all_applies_each_agents_policy() -> None:
    refunds = conversation(get_backend(), items=5, size=10)
    outreach_thread(4)

    report = prune_all()

    assert (report.threads, report.checkpoints) == (1, 3)
    assert ids(get_backend().history(thread_id=THREAD)) == ids(refunds[:-3:-1])
    assert len(get_backend().history(thread_id="thread-2")) == 5


@pytest.fixture
def protect_second() -> Iterator[list[str]]:
    """A receiver like the one approvals may connect: keep the checkpoints named in `kept`."""
    kept: list[str] = []

    def receiver(sender: Any, thread_id: str, **kwargs: Any) -> list[str]:
        return kept

    protect_checkpoints.connect(receiver)
    yield kept
    protect_checkpoints.disconnect(receiver)


@pytest.mark.django_db
def test_prune_all_keeps_what_a_protect_checkpoints_receiver_names(protect_second: list[str]) -> None:
    refunds = conversation(get_backend(), items=5, size=10)
    protect_second.append(refunds[1].id)

    prune_all()

    assert ids(get_backend().history(thread_id=THREAD)) == [refunds[4].id, refunds[3].id, refunds[1].id]


@pytest.mark.django_db
def test_prune_all_drops_expired_store_items() -> None:
    store = store_for(tenant="user:ada")
    store.put(("cache",), "gone", 1, ttl_s=-1)
    store.put(("cache",), "kept", 2)

    assert prune_all().store_items == 1
    assert [item.key for item in store.search(("cache",))] == ["kept"]


@pytest.mark.django_db
def test_the_beat_task_prunes_and_reports() -> None:
    conversation(get_backend(), items=4, size=10)

    assert prune_checkpoints_task() == {"threads": 1, "checkpoints": 2, "values": 0, "store_items": 0}


@pytest.mark.django_db
def test_the_command_overrides_the_policies_for_one_agent() -> None:
    conversation(get_backend(), items=4, size=10)
    outreach_thread(4)
    out = StringIO()

    call_command("prune_checkpoints", "--agent", "outreach", "--keep-last", "1", stdout=out)

    assert "Pruned 4 checkpoints from 1 threads" in out.getvalue()
    assert len(get_backend().history(thread_id="thread-2")) == 1
    assert len(get_backend().history(thread_id=THREAD)) == 4


@pytest.mark.django_db
def test_the_command_refuses_negative_limits() -> None:
    with pytest.raises(CommandError):
        call_command("prune_checkpoints", "--keep-last", "-1", stdout=StringIO())
