"""Measure the store on the workload: write rate and latency, loads, history pages, storage."""

import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from django.db import connection

from checkpoints.backends.base import CheckpointData, NewCheckpoint
from checkpoints.backends.orm import OrmBackend
from checkpoints.bench.cpu import CpuReading, cpu_figures
from checkpoints.bench.database import analyze, disk_bytes, raw_insert_rate, wal_syncs
from checkpoints.bench.workload import Conversation
from checkpoints.digest import canonical_bytes
from checkpoints.models import CheckpointSource, ThreadStatus


def percentile(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1] if len(samples) > 1 else samples[0]


def timed(fn: Callable[[], Any], *, times: int) -> list[float]:
    """Milliseconds of each of `times` calls."""
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def start(backend: OrmBackend, thread_id: str, values: dict[str, Any]) -> CheckpointData:
    first = NewCheckpoint(
        values=values, source=CheckpointSource.INPUT, next=["model"], created_by="user:bench"
    )
    return backend.create_thread(
        thread_id=thread_id, agent="bench", first=first, status=ThreadStatus.RUNNING
    )[1]


def put(backend: OrmBackend, head: CheckpointData, values: dict[str, Any]) -> CheckpointData:
    step = NewCheckpoint(
        values=values, source=CheckpointSource.STEP, next=["model"], node="model", created_by="worker:bench"
    )
    return backend.put(
        thread_id=head.thread_id,
        parent_id=head.id,
        expected_head=head.id,
        checkpoint=step,
        status=ThreadStatus.RUNNING,
    )


def conversation(*, turns: int, seed: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A thread's first state and the state after each of its steps, generated before timing."""
    talk = Conversation(seed=seed)
    first = talk.first()
    return first, list(talk.steps(first, turns=turns))


def write_thread(
    backend: OrmBackend, *, thread_id: str, first: dict[str, Any], states: list[dict[str, Any]]
) -> list[float]:
    """Write one conversation, each checkpoint committed before the next; return per-write ms."""
    samples = []
    head = start(backend, thread_id, first)
    for values in states:
        began = time.perf_counter()
        head = put(backend, head, values)
        samples.append((time.perf_counter() - began) * 1000)
    return samples


def write_threads(
    backend: OrmBackend, *, names: list[str], turns: int, writers: int
) -> tuple[list[float], float, tuple[CpuReading, CpuReading], dict[str, Any]]:
    """Write every thread, `writers` at once on connections of their own; return per-write ms,
    the wall time, CPU readings before and after, and a final state."""
    prepared = [conversation(turns=turns, seed=seed) for seed in range(len(names))]

    def write(n: int) -> list[float]:
        try:
            return write_thread(backend, thread_id=names[n], first=prepared[n][0], states=prepared[n][1])
        finally:
            connection.close()  # each writer thread has its own

    started, cpu = time.perf_counter(), CpuReading.now()
    with ThreadPoolExecutor(writers) as pool:
        samples = list(pool.map(write, range(len(names))))
    wall, spent = time.perf_counter() - started, (cpu, CpuReading.now())
    return [ms for sample in samples for ms in sample], wall, spent, prepared[-1][1][-1]


def write_long_thread(backend: OrmBackend, *, thread_id: str, checkpoints: int) -> list[float]:
    """A thread of `checkpoints` checkpoints, for history pages; return the last 500 writes' ms."""
    conversation = Conversation(seed=10_000)
    first = conversation.first()
    head = start(backend, thread_id, first)
    samples = []
    for count, values in enumerate(conversation.steps(first, turns=checkpoints), start=1):
        began = time.perf_counter()
        head = put(backend, head, values)
        samples.append((time.perf_counter() - began) * 1000)
        if count >= checkpoints - 1:
            break
    return samples[-500:]


def _flushes_since(syncs: int | None) -> int | None:
    """WAL flushes since `syncs` (None off Postgres). The writers' backends report their counts as
    they exit, after their connections closed: wait for them (a short run read 0 before)."""
    if syncs is None:
        return None
    deadline = time.monotonic() + 3
    while (now := wal_syncs() or 0) == syncs and time.monotonic() < deadline:
        time.sleep(0.05)
    return now - syncs


def run(
    *, turns: int, threads: int, writers: int, history_size: int, raw_rows: int, samples: int = 50
) -> dict[str, Any]:
    backend = OrmBackend()
    raw = raw_insert_rate(rows=raw_rows)
    threads = max(threads, writers)
    names = [f"bench-{turns}-{i}" for i in range(threads)]
    syncs = wal_syncs()
    writes, wall, (before, after), final = write_threads(backend, names=names, turns=turns, writers=writers)
    flushes = _flushes_since(syncs)
    analyze()
    result = _summary(turns=turns, threads=threads, writers=writers, writes=writes, wall=wall, raw=raw)
    result.update(
        cpu_figures(
            before=before,
            after=after,
            checkpoints=result["checkpoints"],
            rate=result["checkpoints_per_s"],
            raw_per_s=raw,
        )
    )
    # Above 1: concurrent writers' commits shared WAL flushes (Postgres' group commit).
    result["checkpoints_per_wal_flush"] = round(result["checkpoints"] / flushes, 2) if flushes else None
    result.update(_reads(backend, names, samples=samples))
    result.update(_storage(backend, names, final=len(canonical_bytes(final))))
    if history_size:
        result.update(_history(backend, size=history_size, samples=samples))
    return result


def _reads(backend: OrmBackend, names: list[str], *, samples: int) -> dict[str, Any]:
    loads = [ms for name in names for ms in timed(partial(backend.get, thread_id=name), times=samples)]
    pages = [
        ms
        for name in names
        for ms in timed(partial(backend.history, thread_id=name, limit=50), times=samples)
    ]
    return {
        "head_load_ms_p50": round(statistics.median(loads), 3),
        "history_page_ms_p50_bench_threads": round(statistics.median(pages), 3),
    }


def _storage(backend: OrmBackend, names: list[str], *, final: int) -> dict[str, Any]:
    storage = statistics.mean(backend.storage_bytes(thread_id=name) for name in names)
    disk = disk_bytes() / len(names)
    return {
        "storage_bytes": round(storage),
        "final_state_json_bytes": final,
        "storage_ratio": round(storage / final, 2),
        "disk_bytes": round(disk),
        "disk_ratio": round(disk / final, 2) if disk else None,
    }


def _summary(
    *, turns: int, threads: int, writers: int, writes: list[float], wall: float, raw: float
) -> dict[str, Any]:
    rate = (len(writes) + threads) / wall
    return {
        "turns": turns,
        "threads": threads,
        "writers": writers,
        "checkpoints": len(writes) + threads,
        "checkpoints_per_s": round(rate),
        "write_ms_p50": round(statistics.median(writes), 3),
        "write_ms_p99": round(percentile(writes, 99), 3),
        "raw_insert_per_s": round(raw),
        "checkpoints_per_s_vs_raw": round(rate / raw, 3),
        "write_ms_p50_vs_raw_commit": round(statistics.median(writes) / (1000 / raw), 2),
    }


def _history(backend: OrmBackend, *, size: int, samples: int) -> dict[str, Any]:
    tail = write_long_thread(backend, thread_id="bench-history", checkpoints=size)
    analyze()
    pages = timed(lambda: backend.history(thread_id="bench-history", limit=50), times=samples)
    return {
        "history_size": size,
        "history_page_ms_p50": round(statistics.median(pages), 3),
        "write_ms_p50_at_history_size": round(statistics.median(tail), 3),
    }
