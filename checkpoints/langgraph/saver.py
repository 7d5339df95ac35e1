"""GatehouseSaver: LangGraph's BaseCheckpointSaver on Gatehouse's store (docs/storage.md).

    from checkpoints.langgraph import GatehouseSaver
    graph = builder.compile(checkpointer=GatehouseSaver())

Values are serialized with the saver's serde (LangGraph's JsonPlusSerializer by default), list
channels item by item, and stored once (checkpoints.langgraph.layout); every load checks the
checkpoint's digest, and every value it reads from the database; CHECKPOINT_ENCRYPTION_KEY
encrypts every value, write and header.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, close_old_connections, connections, transaction
from django.db.models import QuerySet
from django.db.models.fields.json import KeyTextTransform
from django.db.models.lookups import Exact
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from checkpoints.backends.base import CorruptCheckpoint
from checkpoints.digest import canonical_bytes, encode_digest
from checkpoints.langgraph import layout, sql
from checkpoints.langgraph.layout import Chain, Tampered
from checkpoints.langgraph.pruning import collect_garbage
from checkpoints.models import LangGraphCheckpoint, LangGraphWrite
from checkpoints.storage.crypto import Sealer, SealError, current_sealer, failed_decryption

T = TypeVar("T")

Key = tuple[str, str, str]
"""(thread_id, checkpoint_ns, checkpoint_id)."""


@dataclass(frozen=True)
class Known:
    """What this process holds of a checkpoint it wrote or read: its refs, its lists' chains (the
    items as objects) and its other values' serialized bytes."""

    refs: dict[str, Any]
    chains: dict[str, Chain]
    plains: dict[str, bytes]

    def values(self, serde: SerializerProtocol, refs: dict[str, Any]) -> dict[str, Any] | None:
        """The checkpoint's values without reading a row, or None if these are not its refs. List
        items are shared objects (as put's identity check already assumes, LangGraph's reducers
        build new lists and never mutate a message); every other value is decoded afresh."""
        held = {**self.chains, **self.plains}
        if refs != self.refs or any(name not in held for name in refs):
            return None
        return {
            name: list(self.chains[name].items)
            if ref[0] == layout.LIST
            else layout.decode(serde, self.plains[name])
            for name, ref in refs.items()
        }


class _Recent:
    """The checkpoints this process wrote or read lately, so a put compares its lists with its
    parent's without a query and a load decodes only what it does not already hold: the cost of a
    step stays flat however long the conversation grows."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._entries: OrderedDict[Key, Known] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Key) -> Known | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: Key, known: Known) -> None:
        with self._lock:
            self._entries[key] = known
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def forget(self, thread_ids: Sequence[str]) -> None:
        with self._lock:
            for key in [k for k in self._entries if k[0] in thread_ids]:
                del self._entries[key]


def on_own_thread(method: Callable[..., T]) -> Callable[..., T]:
    """Run the method on the saver's own thread. LangGraph calls a checkpointer from pool threads
    that live for one invoke; Django keeps a connection per thread, so one thread keeps one."""

    @functools.wraps(method)
    def call(self: GatehouseSaver, *args: Any, **kwargs: Any) -> T:
        if threading.get_ident() == self._thread_ident:
            return method(self, *args, **kwargs)
        return self._executor.submit(_then_release, method, self, *args, **kwargs).result()

    return call


def _then_release(method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call the method, then treat the saver thread's connection as a request's end does: closed
    once it is broken or past CONN_MAX_AGE (given back to the pool in a pooled process). Nothing
    else on this thread ever would, so a connection Postgres dropped (a restart) failed every
    later call, and a pooled one was never given back."""
    try:
        return method(*args, **kwargs)
    finally:
        close_old_connections()


def checkpoint_digest(
    *, ns: str, checkpoint_id: str, parent_id: str | None, header: bytes, metadata: Any, refs: dict[str, Any]
) -> bytes:
    """SHA-256 over a checkpoint's header, metadata and its values' digests (not its thread id, so
    copy_thread copies rows as they are)."""
    body = {
        "ns": ns,
        "id": checkpoint_id,
        "parent": parent_id,
        "header": encode_digest(layout.sha256(header)),
        "metadata": metadata,
        "refs": layout.digest_refs(refs),
    }
    return layout.sha256(canonical_bytes(body))


def _narrowed(
    rows: QuerySet[LangGraphCheckpoint], filter: dict[str, Any], *, vendor: str
) -> QuerySet[LangGraphCheckpoint]:
    """Rows that may match a list() filter (the caller checks exactly). A key is taken literally,
    never as a lookup path: "a__b", "contains" or "in" are metadata keys like any other."""
    for name, value in filter.items():
        if vendor == "postgresql" and isinstance(value, str | int) and not isinstance(value, bool):
            rows = rows.filter(metadata__contains={name: value})  # jsonb @>: the key is data
        elif isinstance(value, str):
            rows = rows.filter(Exact(KeyTextTransform(name, "metadata"), value))
    return rows


def _open_header(sealer: Sealer, stored: bytes) -> bytes:
    """A checkpoint's header bytes; a sealed one that fails decryption (the wrong key, tampered
    bytes) is a corrupt checkpoint, as a value or write that fails it is."""
    try:
        return layout.unpack(sealer, stored)
    except SealError as exc:
        raise Tampered(str(exc)) from exc


class GatehouseSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer on Django's database `using` (default: the default database)."""

    def __init__(
        self, *, using: str = DEFAULT_DB_ALIAS, agent: str = "", serde: SerializerProtocol | None = None
    ) -> None:
        super().__init__(serde=serde)
        self.using = using
        self.agent = agent
        """Whose retention policy (settings.CHECKPOINT_RETENTION_SOURCE) prunes these checkpoints."""
        self._recent = _Recent()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gatehouse-saver")
        self._thread_ident = self._executor.submit(threading.get_ident).result()

    def close(self) -> None:
        """Close the saver's database connection and stop its thread."""
        self.close_connection()
        self._executor.shutdown()

    def close_connection(self) -> None:
        """Close the saver thread's database connection; its next call opens another (a test
        database cannot be dropped while one is open)."""
        self._executor.submit(connections.close_all).result()

    async def _async(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.wrap_future(self._executor.submit(_then_release, method, *args, **kwargs))

    # -- writing --------------------------------------------------------------------------------

    @on_own_thread
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        conf = config["configurable"]
        thread_id, ns, parent_id = conf["thread_id"], conf.get("checkpoint_ns", ""), conf.get("checkpoint_id")
        sealer = current_sealer()
        parent = (self._parent(thread_id, ns, parent_id) if parent_id else None) or Known({}, {}, {})
        values = checkpoint["channel_values"]
        refs: dict[str, Any] = {}
        chains: dict[str, Chain] = {}
        plains: dict[str, bytes] = {}
        rows: list[layout.BlobRow] = []
        for name in checkpoint["channel_versions"]:
            if name not in new_versions and name in parent.refs:
                refs[name], sealed = layout.inherited_ref(sealer, parent.refs[name])
                if sealed is not None:
                    rows.append(sealed)
                if name in parent.chains:
                    chains[name] = parent.chains[name]
                if name in parent.plains:
                    plains[name] = parent.plains[name]
                continue
            if name not in values:
                continue  # an empty channel
            value = values[name]
            if isinstance(value, list):
                chains[name], added = layout.grow(self.serde, sealer, parent.chains.get(name), value)
                refs[name] = layout.list_ref(chains[name])
                rows += added
                continue
            plains[name] = layout.encode(self.serde, value)
            refs[name], row = layout.stored_value(sealer, plains[name])
            if row is not None and parent.refs.get(name) != refs[name]:
                rows.append(row)
        # The id is the row's own key: the header holds the rest (versions, versions seen, ts).
        header = layout.encode(
            self.serde, {k: v for k, v in checkpoint.items() if k not in ("id", "channel_values")}
        )
        meta = get_serializable_checkpoint_metadata(config, metadata)
        digest = checkpoint_digest(
            ns=ns,
            checkpoint_id=checkpoint["id"],
            parent_id=parent_id,
            header=header,
            metadata=meta,
            refs=refs,
        )
        sql.put_checkpoint(
            self.using,
            thread_id,
            list({r.key: r for r in rows}.values()),
            {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
                "parent_id": parent_id or "",
                "agent": self.agent,
                "header": layout.pack(sealer, header),
                "refs": refs,
                "metadata": meta,
                "digest": digest,
            },
        )
        self._recent.put((thread_id, ns, checkpoint["id"]), Known(refs, chains, plains))
        return {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}
        }

    def _parent(self, thread_id: str, ns: str, checkpoint_id: str) -> Known | None:
        cached = self._recent.get((thread_id, ns, checkpoint_id))
        if cached is not None:
            return cached
        row = (
            LangGraphCheckpoint.objects.using(self.using)
            .filter(thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint_id)
            .first()
        )
        if row is None:
            return None
        self._load(row)  # fills the cache
        return self._recent.get((thread_id, ns, checkpoint_id))

    @on_own_thread
    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        conf = config["configurable"]
        key = (conf["thread_id"], conf.get("checkpoint_ns", ""), conf["checkpoint_id"])
        sealer = current_sealer()
        rows, blobs = [], []
        for idx, (channel, value) in enumerate(writes):
            data, plain, items = layout.write_rows(self.serde, sealer, value)
            blobs += items
            digest = layout.sha256(channel.encode() + b"\0" + plain)
            rows.append(
                (
                    *key,
                    task_id,
                    WRITES_IDX_MAP.get(channel, idx),
                    channel,
                    task_path,
                    data,
                    digest,
                )
            )
        # Special writes (errors, interrupts) replace; a regular write is recorded once.
        replace = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        sql.put_writes(self.using, key[0], list({b.key: b for b in blobs}.values()), rows, replace=replace)

    # -- reading --------------------------------------------------------------------------------

    @on_own_thread
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = config["configurable"]
        found = sql.read_checkpoint(
            self.using, conf["thread_id"], conf.get("checkpoint_ns", ""), get_checkpoint_id(config)
        )
        return self._load(*found) if found is not None else None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return iter(self._list_all(config, filter=filter, before=before, limit=limit))

    @on_own_thread
    def _list_all(self, *args: Any, **kwargs: Any) -> builtins.list[CheckpointTuple]:
        return [*self._list(*args, **kwargs)]

    def _list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        rows = LangGraphCheckpoint.objects.using(self.using).all()
        if config is not None:
            conf = config["configurable"]
            rows = rows.filter(thread_id=conf["thread_id"])
            if conf.get("checkpoint_ns") is not None:
                rows = rows.filter(checkpoint_ns=conf["checkpoint_ns"])
            if checkpoint_id := get_checkpoint_id(config):
                rows = rows.filter(checkpoint_id=checkpoint_id)
        if before is not None and (before_id := get_checkpoint_id(before)):
            rows = rows.filter(checkpoint_id__lt=before_id)
        rows = _narrowed(rows, filter or {}, vendor=connections[self.using].vendor)
        found = 0
        for row in rows.order_by("-checkpoint_id").iterator():
            if filter and not all(row.metadata.get(k) == v for k, v in filter.items()):
                continue
            if limit is not None and found >= limit:
                return
            found += 1
            yield self._load(row)

    def _load(
        self, row: LangGraphCheckpoint, stored_writes: builtins.list[tuple[Any, ...]] | None = None
    ) -> CheckpointTuple:
        """Decode and verify a checkpoint with its values and pending writes (read here unless
        given); cache its layout."""
        thread_id, ns, checkpoint_id = row.thread_id, row.checkpoint_ns, row.checkpoint_id
        sealer = current_sealer()
        try:
            header = _open_header(sealer, bytes(row.header))
            refs = row.refs
            expected = checkpoint_digest(
                ns=ns,
                checkpoint_id=checkpoint_id,
                parent_id=row.parent_id or None,
                header=header,
                metadata=row.metadata,
                refs=refs,
            )
            if expected != bytes(row.digest):
                raise Tampered("the checkpoint does not match its digest")
            if stored_writes is None:
                stored_writes = sql.read_writes(self.using, thread_id, ns, checkpoint_id)
            items = [k for w in stored_writes for k in layout.write_keys(w[4])]
            # The refs are covered by the verified digest: values held for the same refs are these.
            known = self._recent.get((thread_id, ns, checkpoint_id))
            values = known.values(self.serde, refs) if known is not None else None
            if values is None or known is None:
                limit = 1 + sum(int(ref[2]) for ref in refs.values() if ref[0] == layout.LIST)
                blobs = sql.read_blobs(self.using, thread_id, [*layout.starts(refs), *items], limit=limit)
                values, chains, plains = layout.read_values(refs, blobs, serde=self.serde, sealer=sealer)
                known = Known(refs, chains, plains)
            else:
                blobs = sql.read_blobs(self.using, thread_id, items, limit=1) if items else {}
            writes = self._writes(stored_writes, blobs)
            checkpoint = {"id": checkpoint_id, **layout.decode(self.serde, header), "channel_values": values}
        except Tampered as exc:
            raise CorruptCheckpoint(thread_id, checkpoint_id, undecryptable=failed_decryption(exc)) from exc
        self._recent.put((thread_id, ns, checkpoint_id), known)
        conf = {"thread_id": thread_id, "checkpoint_ns": ns}
        return CheckpointTuple(
            config={"configurable": {**conf, "checkpoint_id": checkpoint_id}},
            checkpoint=checkpoint,  # type: ignore[arg-type]
            metadata=row.metadata,
            parent_config={"configurable": {**conf, "checkpoint_id": row.parent_id}}
            if row.parent_id
            else None,
            pending_writes=writes,
        )

    def _writes(
        self, stored: builtins.list[tuple[Any, ...]], blobs: dict[bytes, tuple[bytes | None, bytes]]
    ) -> builtins.list[tuple[str, str, Any]]:
        sealer = current_sealer()
        writes = []
        for task_id, idx, channel, _task_path, data, digest in sorted(
            stored, key=lambda w: (w[3], w[0], w[1])
        ):
            try:
                plain, value = layout.read_write(data, blobs, serde=self.serde, sealer=sealer)
            except Tampered:
                raise
            except Exception as exc:  # decryption, a malformed payload
                raise Tampered(str(exc)) from exc
            if layout.sha256(channel.encode() + b"\0" + plain) != digest:
                raise Tampered(f"pending write {task_id}/{idx} does not match its digest")
            writes.append((task_id, channel, value))
        return writes

    # -- deleting, copying, pruning -------------------------------------------------------------

    @on_own_thread
    def delete_thread(self, thread_id: str) -> None:
        with transaction.atomic(using=self.using):
            for model in (LangGraphWrite, LangGraphCheckpoint):
                model.objects.using(self.using).filter(thread_id=thread_id).delete()
            sql.delete_blobs(self.using, thread_id, sql.blob_links(self.using, thread_id))
        self._recent.forget([thread_id])

    @on_own_thread
    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        if not run_ids:
            return
        with transaction.atomic(using=self.using):
            doomed = list(
                LangGraphCheckpoint.objects.using(self.using)
                .filter(metadata__run_id__in=list(run_ids))
                .values_list("thread_id", "checkpoint_ns", "checkpoint_id")
            )
            self._delete(doomed)

    @on_own_thread
    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        with transaction.atomic(using=self.using):
            sql.copy_thread(self.using, source_thread_id, target_thread_id)

    @on_own_thread
    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if strategy == "delete":
            for thread_id in thread_ids:
                self.delete_thread(thread_id)
            return
        if strategy != "keep_latest":
            raise ValueError(f"unknown prune strategy {strategy!r} (keep_latest or delete)")
        with transaction.atomic(using=self.using):
            rows = LangGraphCheckpoint.objects.using(self.using).filter(thread_id__in=list(thread_ids))
            newest: dict[tuple[str, str], str] = {}
            keys = list(rows.values_list("thread_id", "checkpoint_ns", "checkpoint_id"))
            for thread_id, ns, checkpoint_id in keys:
                newest[(thread_id, ns)] = max(newest.get((thread_id, ns), ""), checkpoint_id)
            self._delete([k for k in keys if newest[(k[0], k[1])] != k[2]])

    def _delete(self, keys: Sequence[Key]) -> None:
        """Delete these checkpoints and their writes, then the values no other checkpoint holds."""
        for thread_id, ns, checkpoint_id in keys:
            for model in (LangGraphWrite, LangGraphCheckpoint):
                model.objects.using(self.using).filter(
                    thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint_id
                ).delete()
        for thread_id in {k[0] for k in keys}:
            collect_garbage(self.using, thread_id)
        self._recent.forget(list({k[0] for k in keys}))

    # -- async twins: the same calls, on the saver's thread -----------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._async(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for item in await self._async(self._list_all, config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._async(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await self._async(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._async(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._async(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._async(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._async(self.prune, thread_ids, strategy=strategy)
