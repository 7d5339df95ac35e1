"""GatehouseSaver against LangGraph's own conformance suite, and what the suite does not check:
linear storage, digests, encryption and retention."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from io import StringIO
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import OperationalError, connection, transaction
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate

from checkpoints.backends import get_backend
from checkpoints.backends.base import CorruptCheckpoint
from checkpoints.bench.langgraph_graph import RESULT, conversation_graph
from checkpoints.langgraph import GatehouseSaver, layout
from checkpoints.models import LangGraphBlob, LangGraphCheckpoint, LangGraphWrite
from checkpoints.retention import Override, prune_all
from checkpoints.storage.crypto import current_sealer
from checkpoints.tests.helpers import start, write

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def savers() -> Iterator[Callable[..., GatehouseSaver]]:
    made: list[GatehouseSaver] = []

    def make(**kwargs: Any) -> GatehouseSaver:
        made.append(GatehouseSaver(**kwargs))
        return made[-1]

    yield make
    for saver in made:
        saver.close()


@checkpointer_test(name="GatehouseSaver")
async def gatehouse_saver() -> AsyncIterator[GatehouseSaver]:
    saver = GatehouseSaver()
    yield saver
    saver.close()  # its connection, or the test database cannot be dropped


def test_gatehouse_saver_passes_every_langgraph_conformance_capability() -> None:
    report = asyncio.run(validate(gatehouse_saver))
    failures = {name: result.failures for name, result in report.results.items() if not result.passed}
    assert failures == {}
    assert all(result.detected and result.tests_passed for result in report.results.values())
    assert sorted(report.results) == sorted(
        ["put", "put_writes", "get_tuple", "list", "delete_thread", "delete_for_runs", "copy_thread", "prune"]
    )


def run_turns(saver: GatehouseSaver, *, thread_id: str, turns: int) -> dict[str, Any]:
    graph = conversation_graph(saver)
    config = {"configurable": {"thread_id": thread_id}}
    for _ in range(turns):
        graph.invoke({"messages": []}, config)
    return config


def messages_of(saver: GatehouseSaver, config: Any) -> list[Any]:
    loaded = saver.get_tuple(config)
    assert loaded is not None
    return list(loaded.checkpoint["channel_values"]["messages"])


def plain(data: Any) -> bytes:
    """Stored bytes as the saver reads them (decompressed)."""
    return layout.unpack(current_sealer(), bytes(data))


def blob_bytes(thread_id: str) -> int:
    return sum(
        len(bytes(d))
        for d in LangGraphBlob.objects.filter(thread_id=thread_id).values_list("data", flat=True)
    )


def test_a_conversation_stores_each_message_once(savers: Callable[..., GatehouseSaver]) -> None:
    saver = savers()
    config = run_turns(saver, thread_id="t-linear", turns=30)
    messages = messages_of(saver, config)
    assert len(messages) == 60
    # 60 list items naming 60 message rows, and one row per distinct turn counter.
    assert LangGraphBlob.objects.filter(thread_id="t-linear", prev__isnull=False).count() == 59
    assert LangGraphCheckpoint.objects.filter(thread_id="t-linear").count() == 4 * 30
    final = sum(len(saver.serde.dumps_typed(m)[1]) for m in messages)
    # The message a node wrote (a pending write) is the row the next checkpoint's list names, so
    # values and writes together hold each message about once (twice only when LangGraph gives
    # a message its id after the write was taken: then the two copies differ).
    written = LangGraphWrite.objects.filter(thread_id="t-linear").values_list("data", flat=True)
    assert sum(len(bytes(d)) for d in written) < 0.1 * final
    assert blob_bytes("t-linear") + sum(len(bytes(d)) for d in written) < 1.5 * final


def test_long_values_are_stored_compressed_and_short_ones_in_the_checkpoint(
    savers: Callable[..., GatehouseSaver],
) -> None:
    saver = savers()
    config = run_turns(saver, thread_id="t-small", turns=3)
    stored = [
        bytes(d) for d in LangGraphBlob.objects.filter(thread_id="t-small").values_list("data", flat=True)
    ]
    results = [d for d in stored if RESULT.encode() in plain(d)]
    assert len(results) >= 3 and all(d.startswith(layout.PACKED) for d in results)
    assert sum(map(len, results)) < 0.5 * sum(len(plain(d)) for d in results)
    head = LangGraphCheckpoint.objects.filter(thread_id="t-small").order_by("-checkpoint_id")[0]
    assert bytes(head.header).startswith(layout.PACKED)
    # The turn counter is held in the refs: the thread's rows are its messages and their list items.
    assert head.refs["turn"][0] == layout.INLINE
    assert all(d.startswith(layout.REF) or b"content" in plain(d) for d in stored)
    fresh = savers().get_tuple(config)
    assert fresh is not None and fresh.checkpoint["channel_values"]["turn"] == 3


def test_a_pending_write_of_messages_loads_back_and_a_tampered_item_is_refused(
    savers: Callable[..., GatehouseSaver],
) -> None:
    saver = savers()
    run_turns(saver, thread_id="t-writes", turns=2)
    first = LangGraphCheckpoint.objects.filter(thread_id="t-writes").order_by("checkpoint_id")[2]
    at = {
        "configurable": {"thread_id": "t-writes", "checkpoint_ns": "", "checkpoint_id": first.checkpoint_id}
    }
    loaded = savers().get_tuple(at)
    assert loaded is not None and loaded.pending_writes is not None
    messages = [v for _, channel, v in loaded.pending_writes if channel == "messages"]
    assert [type(m).__name__ for m in messages[0]] == ["ToolMessage"]
    assert messages[0][0].content.endswith(RESULT)
    # The tool result of turn 1 is a row of its own, named by that write (two rows when LangGraph
    # gave the message its id after the write was taken: the copies differ): change them.
    rows = LangGraphBlob.objects.filter(thread_id="t-writes", prev__isnull=True).values_list("key", "data")
    keys = [key for key, data in rows if b"A-1: " in plain(data)]
    assert 1 <= len(keys) <= 2
    LangGraphBlob.objects.filter(thread_id="t-writes", key__in=keys).update(data=b"msgpack\0tampered")
    with pytest.raises(CorruptCheckpoint):
        savers().get_tuple(at)


@pytest.mark.postgres_only  # SQLite has one writer: the caller's IMMEDIATE transaction holds it
def test_a_put_does_not_join_the_callers_transaction(savers: Callable[..., GatehouseSaver]) -> None:
    # Its queries run on the saver's own thread and connection: a caller's rollback keeps them.
    saver = savers()
    with pytest.raises(RuntimeError), transaction.atomic():
        config = run_turns(saver, thread_id="outside-the-callers", turns=1)
        raise RuntimeError("the caller rolls back")

    assert LangGraphCheckpoint.objects.filter(thread_id="outside-the-callers").exists()
    assert messages_of(savers(), config)


def test_a_fresh_saver_continues_a_conversation_from_the_database(
    savers: Callable[..., GatehouseSaver],
) -> None:
    run_turns(savers(), thread_id="t-resume", turns=3)
    saver = savers()  # an empty cache: the parent is read back and compared by bytes
    config = run_turns(saver, thread_id="t-resume", turns=2)
    assert len(messages_of(saver, config)) == 10
    assert LangGraphBlob.objects.filter(thread_id="t-resume", prev__isnull=False).count() == 9


def statements_of(saver: GatehouseSaver, call: Callable[[], Any]) -> list[str]:
    """The SQL the saver runs (on its own thread) during call()."""
    seen: list[str] = []

    def record(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        seen.append(sql)
        return execute(sql, *args)

    def wrapped() -> Any:
        with connection.execute_wrapper(record):
            return call()

    saver._executor.submit(wrapped).result()
    return seen


def test_a_step_decodes_only_what_it_added_however_long_the_conversation(
    savers: Callable[..., GatehouseSaver],
) -> None:
    saver = savers()
    config = run_turns(saver, thread_id="t-flat", turns=40)
    # The head this saver wrote is loaded from what it holds: the checkpoint row and its
    # pending writes are read, in one query (another process may have written them), no value
    # row is.
    loads = statements_of(saver, lambda: saver.get_tuple(config))
    assert len(loads) == 1 and "langgraphwrite" in loads[0] and "langgraphblob" not in loads[0]
    held = messages_of(saver, config)
    fresh = messages_of(savers(), config)  # an empty cache: every row read and verified
    assert held == fresh and len(held) == 80
    # The list is the loader's own: changing it changes no later load.
    held.pop()
    assert len(messages_of(saver, config)) == 80


def test_a_tampered_message_is_refused_on_load(savers: Callable[..., GatehouseSaver]) -> None:
    saver = savers()
    config = run_turns(saver, thread_id="t-tamper", turns=2)
    item = LangGraphBlob.objects.filter(thread_id="t-tamper", prev__isnull=False).first()
    assert item is not None
    row = LangGraphBlob.objects.get(thread_id="t-tamper", key=bytes(item.data)[1:])  # the message it names
    data = layout.pack(current_sealer(), plain(row.data).replace(b"order", b"ORDER"))
    LangGraphBlob.objects.filter(thread_id="t-tamper", key=row.key).update(data=data)
    with pytest.raises(CorruptCheckpoint):
        savers().get_tuple(config)


def assert_sealed(thread_id: str) -> None:
    stored = [
        bytes(d) for d in LangGraphBlob.objects.filter(thread_id=thread_id).values_list("data", flat=True)
    ]
    stored += [
        bytes(d) for d in LangGraphWrite.objects.filter(thread_id=thread_id).values_list("data", flat=True)
    ]
    # List items and message writes hold only content keys (NUL + 16-byte keys); the rest is sealed.
    stored = [d for d in stored if not (d.startswith(b"\0") and (len(d) - 1) % 16 == 0)]
    stored += [
        bytes(h)
        for h in LangGraphCheckpoint.objects.filter(thread_id=thread_id).values_list("header", flat=True)
    ]
    assert stored and all(data.startswith(b"gAAAA") for data in stored)
    # Nothing is held in plain beside the sealed rows (short values neither).
    kinds = {
        ref[0] for c in LangGraphCheckpoint.objects.filter(thread_id=thread_id) for ref in c.refs.values()
    }
    assert kinds == {layout.LIST, layout.VALUE}


@pytest.mark.parametrize("held", ["bXNncGFjawAH", "not base64!"])
def test_a_changed_value_held_in_the_refs_is_refused_on_load(
    held: str, savers: Callable[..., GatehouseSaver]
) -> None:
    config = run_turns(savers(), thread_id="t-held", turns=2)
    head = LangGraphCheckpoint.objects.filter(thread_id="t-held").order_by("-checkpoint_id")[0]
    LangGraphCheckpoint.objects.filter(pk=head.pk).update(refs={**head.refs, "turn": [layout.INLINE, held]})
    with pytest.raises(CorruptCheckpoint):
        savers().get_tuple(config)


def test_values_writes_and_headers_are_encrypted_with_the_checkpoint_key(
    settings: Any, savers: Callable[..., GatehouseSaver]
) -> None:
    settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()
    saver = savers()
    config = run_turns(saver, thread_id="t-sealed", turns=2)
    assert_sealed("t-sealed")
    assert messages_of(savers(), config)[-1].content.endswith(RESULT)


def test_a_thread_stored_in_plain_continues_once_a_key_is_set_and_before_rotating(
    settings: Any, savers: Callable[..., GatehouseSaver]
) -> None:
    run_turns(savers(), thread_id="t-mixed", turns=1)
    settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()
    config = run_turns(savers(), thread_id="t-mixed", turns=1)
    newest = LangGraphCheckpoint.objects.filter(thread_id="t-mixed").order_by("-checkpoint_id")[0]
    assert bytes(newest.header).startswith(b"gAAAA") and newest.refs["turn"][0] == layout.VALUE
    assert [m.content[:5] for m in messages_of(savers(), config)[1::2]] == ["A-1: ", "A-2: "]
    assert len(list(savers().list({"configurable": {"thread_id": "t-mixed"}}))) == 8


def test_rotating_the_key_seals_a_thread_stored_before_it_and_every_checkpoint_still_loads(
    settings: Any, savers: Callable[..., GatehouseSaver]
) -> None:
    run_turns(savers(), thread_id="t-rotate", turns=2)  # compressed, the counter in refs
    thread: RunnableConfig = {"configurable": {"thread_id": "t-rotate"}}
    before = [(t.checkpoint, t.pending_writes) for t in savers().list(thread)]
    old = Fernet.generate_key().decode()
    settings.CHECKPOINT_ENCRYPTION_KEY = old
    call_command("rotate_checkpoint_key", stdout=StringIO())
    assert_sealed("t-rotate")
    new = Fernet.generate_key().decode()
    settings.CHECKPOINT_ENCRYPTION_KEY = f"{new},{old}"
    call_command("rotate_checkpoint_key", stdout=StringIO())
    settings.CHECKPOINT_ENCRYPTION_KEY = new  # the old key is gone: everything is under the new one
    assert [(t.checkpoint, t.pending_writes) for t in savers().list(thread)] == before
    assert len(messages_of(savers(), run_turns(savers(), thread_id="t-rotate", turns=1))) == 6


def lg_policies(agent: str) -> Override | None:
    return Override(keep_last=2) if agent == "lg-refunds" else None


def test_retention_prunes_an_agents_langgraph_threads_and_keeps_the_head(
    settings: Any, savers: Callable[..., GatehouseSaver]
) -> None:
    settings.CHECKPOINT_RETENTION_SOURCE = "checkpoints.tests.test_langgraph_saver.lg_policies"
    config = run_turns(savers(agent="lg-refunds"), thread_id="t-kept", turns=4)
    run_turns(savers(agent="other"), thread_id="t-other", turns=2)
    report = prune_all()
    assert report.checkpoints == 16 - 2
    assert LangGraphCheckpoint.objects.filter(thread_id="t-kept").count() == 2
    assert LangGraphCheckpoint.objects.filter(thread_id="t-other").count() == 8
    assert len(messages_of(savers(), config)) == 8


def put_values(
    saver: GatehouseSaver, *, thread_id: str, values: dict[str, Any], changed: set[str], parent: str | None
) -> RunnableConfig:
    """A checkpoint of these values under parent, LangGraph having bumped only `changed`."""
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = {name: 1 for name in values}
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    if parent:
        config["configurable"]["checkpoint_id"] = parent
    new_versions = {name: 1 for name in changed}
    return saver.put(config, checkpoint, {"source": "loop", "step": 0}, new_versions)


def test_an_unchanged_value_held_in_a_parents_refs_is_sealed_in_the_child_once_encrypting(
    settings: Any, savers: Callable[..., GatehouseSaver]
) -> None:
    saver = savers()  # keeps the parent's refs (the short value inline) in memory
    first = put_values(
        saver, thread_id="t-inherit", values={"pin": "4321", "n": 1}, changed={"pin", "n"}, parent=None
    )
    settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()
    call_command("rotate_checkpoint_key", stdout=StringIO())
    second = put_values(
        saver,
        thread_id="t-inherit",
        values={"pin": "4321", "n": 2},
        changed={"n"},
        parent=first["configurable"]["checkpoint_id"],
    )
    refs = LangGraphCheckpoint.objects.get(
        thread_id="t-inherit", checkpoint_id=second["configurable"]["checkpoint_id"]
    ).refs
    assert {ref[0] for ref in refs.values()} == {layout.VALUE}
    stored = LangGraphBlob.objects.filter(thread_id="t-inherit").values_list("data", flat=True)
    assert all(bytes(data).startswith(b"gAAAA") for data in stored)
    loaded = savers().get_tuple(second)
    assert loaded is not None and loaded.checkpoint["channel_values"] == {"pin": "4321", "n": 2}


def tamper_header(thread_id: str) -> None:
    row = LangGraphCheckpoint.objects.get(thread_id=thread_id)
    header = bytearray(bytes(row.header))
    header[-5] ^= 1
    LangGraphCheckpoint.objects.filter(pk=row.pk).update(header=bytes(header))


@pytest.mark.parametrize("fault", ["wrong key", "tampered"])
def test_a_sealed_header_that_fails_decryption_is_a_corrupt_checkpoint(
    fault: str, settings: Any, savers: Callable[..., GatehouseSaver]
) -> None:
    settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()
    config = put_values(savers(), thread_id="t-header", values={"x": "y" * 100}, changed={"x"}, parent=None)
    if fault == "wrong key":
        settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()
    else:
        tamper_header("t-header")
    with pytest.raises(CorruptCheckpoint):
        savers().get_tuple(config)
    with pytest.raises(CorruptCheckpoint):
        list(savers().list({"configurable": {"thread_id": "t-header"}}))


@pytest.mark.parametrize("key", ["", Fernet.generate_key().decode()], ids=["inline", "sealed"])
def test_retention_keeps_the_langgraph_checkpoints_gatehouse_checkpoints_name(
    key: str, settings: Any, savers: Callable[..., GatehouseSaver]
) -> None:
    settings.CHECKPOINT_RETENTION_SOURCE = "checkpoints.tests.test_langgraph_saver.lg_policies"
    settings.CHECKPOINT_ENCRYPTION_KEY = key  # with a key, the names are sealed rows, not inline
    run_turns(savers(agent="lg-refunds"), thread_id="t-named", turns=4)
    oldest = list(
        LangGraphCheckpoint.objects.filter(thread_id="t-named")
        .order_by("checkpoint_id")
        .values_list("checkpoint_id", flat=True)
    )
    # A thread's head, and an imported thread's head naming the thread it was imported from.
    start(get_backend(), "t-named", agent="lg-refunds", values={"langgraph_checkpoint": oldest[0]})
    imported = {"langgraph_checkpoint": oldest[5], "langgraph_thread": "t-named"}
    start(get_backend(), "t-imported", agent="lg-refunds", values=imported)

    report = prune_all()

    assert report.checkpoints == 16 - 4
    kept = {c.checkpoint_id for c in LangGraphCheckpoint.objects.filter(thread_id="t-named")}
    assert kept == {oldest[0], oldest[5], *oldest[-2:]}
    named = {"configurable": {"thread_id": "t-named", "checkpoint_ns": "", "checkpoint_id": oldest[0]}}
    assert savers().get_tuple(named) is not None


@pytest.mark.parametrize("moved_on", [False, True], ids=["first-kept", "first-pruned"])
def test_retention_keeps_the_first_langgraph_checkpoint_while_a_gatehouse_checkpoint_names_none(
    moved_on: bool, settings: Any, savers: Callable[..., GatehouseSaver]
) -> None:
    """A thread's first Gatehouse checkpoint names no LangGraph checkpoint: a fork from it runs from
    the LangGraph thread's first (step -1), not on from the latest (another branch's end)."""
    settings.CHECKPOINT_RETENTION_SOURCE = "checkpoints.tests.test_langgraph_saver.lg_policies"
    run_turns(savers(agent="lg-refunds"), thread_id="t-start", turns=4)
    thread: RunnableConfig = {"configurable": {"thread_id": "t-start", "checkpoint_ns": ""}}
    [root] = savers().list(thread, filter={"step": -1})  # what the adapter's _root runs from
    _, first = start(get_backend(), "t-start", agent="lg-refunds", values={"langgraph_checkpoint": ""})
    if moved_on:  # two later checkpoints: keep_last=2 prunes the first Gatehouse checkpoint
        newest = LangGraphCheckpoint.objects.filter(thread_id="t-start").latest("checkpoint_id")
        latest = {"langgraph_checkpoint": newest.checkpoint_id}
        write(get_backend(), write(get_backend(), first, latest), latest)

    prune_all()

    roots = [c.config for c in savers().list(thread, filter={"step": -1})]
    assert roots == ([] if moved_on else [root.config])
    assert LangGraphCheckpoint.objects.filter(thread_id="t-start").count() == (2 if moved_on else 3)


def langgraph_rows(thread_id: str) -> list[int]:
    return [
        m.objects.filter(thread_id=thread_id).count()
        for m in (LangGraphCheckpoint, LangGraphBlob, LangGraphWrite)
    ]


def test_deleting_a_thread_deletes_its_langgraph_checkpoints_values_and_writes(
    savers: Callable[..., GatehouseSaver],
) -> None:
    run_turns(savers(agent="lg-refunds"), thread_id="t-gone", turns=2)
    run_turns(savers(agent="lg-refunds"), thread_id="t-stays", turns=1)
    start(get_backend(), "t-gone", agent="lg-refunds")
    stays = langgraph_rows("t-stays")

    get_backend().delete_thread(thread_id="t-gone")

    assert langgraph_rows("t-gone") == [0, 0, 0]
    assert langgraph_rows("t-stays") == stays


def test_deleting_a_thread_keeps_the_langgraph_checkpoint_an_imported_thread_names(
    savers: Callable[..., GatehouseSaver],
) -> None:
    run_turns(savers(agent="lg-refunds"), thread_id="t-source", turns=2)
    named = (
        LangGraphCheckpoint.objects.filter(thread_id="t-source").order_by("checkpoint_id")[3].checkpoint_id
    )
    start(get_backend(), "t-source", agent="lg-refunds")
    imported = {"langgraph_checkpoint": named, "langgraph_thread": "t-source"}
    start(
        get_backend(), "t-copy", agent="lg-refunds", values=imported
    )  # it has not run: it copies at its first step

    get_backend().delete_thread(thread_id="t-source")

    assert [c.checkpoint_id for c in LangGraphCheckpoint.objects.filter(thread_id="t-source")] == [named]
    config = {"configurable": {"thread_id": "t-source", "checkpoint_ns": "", "checkpoint_id": named}}
    assert savers().get_tuple(config) is not None


@pytest.mark.parametrize("name", ["user__id", "contains", "in", "isnull", "has_key", "lt", "regex", "plain"])
@pytest.mark.parametrize("value", ["v", 5])
def test_list_filters_on_a_metadata_key_taken_literally(
    name: str, value: Any, savers: Callable[..., GatehouseSaver]
) -> None:
    saver = savers()
    config: RunnableConfig = {"configurable": {"thread_id": "t-filter", "checkpoint_ns": ""}}
    saver.put(config, empty_checkpoint(), {"source": "input", "step": -1, name: value}, {})
    saver.put(config, empty_checkpoint(), {"source": "input", "step": -1, name: "other"}, {})
    assert len(list(saver.list(None, filter={name: value}))) == 1
    assert len(list(saver.list(config, filter={name: value, "step": -1}))) == 1


def backend_pid(saver: GatehouseSaver) -> int | None:
    """The Postgres session the saver's thread holds now, if any."""
    return saver._executor.submit(
        lambda: connection.connection.info.backend_pid if connection.connection is not None else None
    ).result()


@pytest.mark.postgres_only  # a session Postgres ends under the saver
def test_a_saver_whose_connection_postgres_dropped_reconnects_on_its_next_call(
    savers: Callable[..., GatehouseSaver],
) -> None:
    saver = savers()
    config = run_turns(saver, thread_id="t-dropped", turns=1)
    pid = backend_pid(saver)
    assert pid is not None  # CONN_MAX_AGE keeps it between calls outside a pool
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])

    with contextlib.suppress(OperationalError):  # the call in flight when it dropped fails
        run_turns(saver, thread_id="t-dropped", turns=1)
    # The next ones reconnect: a restarted Postgres does not fail every later step of the agent.
    run_turns(saver, thread_id="t-dropped", turns=1)
    assert len(messages_of(saver, config)) in (4, 6)
    assert backend_pid(saver) not in (None, pid)


@pytest.mark.postgres_only  # a backend pid to look at
def test_a_saver_gives_its_connection_back_after_a_call_once_past_conn_max_age(
    savers: Callable[..., GatehouseSaver],
) -> None:
    saver = savers()
    config = run_turns(saver, thread_id="t-released", turns=1)
    max_age = connection.settings_dict["CONN_MAX_AGE"]
    connection.settings_dict["CONN_MAX_AGE"] = 0  # as in a pooled process: closing gives it back
    try:
        saver.close_connection()  # the next one is opened under CONN_MAX_AGE 0
        assert len(messages_of(saver, config)) == 2
        assert backend_pid(saver) is None  # closed once the call ended
    finally:
        connection.settings_dict["CONN_MAX_AGE"] = max_age
