"""The store as tools reach it: the tenant comes from the thread, never from the caller."""

import pytest

from checkpoints.backends import get_backend
from checkpoints.store import store_for, store_for_thread, tenant_of
from checkpoints.tests.helpers import start


@pytest.mark.django_db
def test_a_threads_tenant_is_its_metadata_tenant() -> None:
    thread, _ = start(get_backend(), metadata={"tenant": "org:acme"})

    assert tenant_of(thread) == "org:acme"


@pytest.mark.django_db
def test_a_thread_without_a_tenant_shares_its_agents_memory() -> None:
    thread, _ = start(get_backend(), agent="outreach")

    assert tenant_of(thread) == "agent:outreach"


@pytest.mark.django_db
def test_store_for_thread_reads_and_writes_under_the_threads_tenant() -> None:
    start(get_backend(), "t-acme", metadata={"tenant": "org:acme"})
    start(get_backend(), "t-other", metadata={"tenant": "org:other"})

    store_for_thread(thread_id="t-acme").put(("notes",), "k", "acme's")

    assert store_for(tenant="org:acme").get(("notes",), "k").value == "acme's"  # type: ignore[union-attr]
    assert store_for_thread(thread_id="t-other").get(("notes",), "k") is None
    assert store_for_thread(thread_id="t-other").get(("org:acme", "notes"), "k") is None
