"""Side by side on one Postgres: GatehouseSaver and LangGraph's PostgresSaver, same graph, same run."""

import json
import statistics
import time
from typing import Any

from django.core.management.base import BaseCommand
from django.db import connection
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import Connection
from psycopg.rows import dict_row

from checkpoints.bench.database import _params, bench_database
from checkpoints.bench.langgraph_graph import conversation_graph
from checkpoints.langgraph import GatehouseSaver

TABLES = {
    "gatehouse": [
        "checkpoints_langgraphcheckpoint",
        "checkpoints_langgraphblob",
        "checkpoints_langgraphwrite",
    ],
    "postgres_saver": ["checkpoints", "checkpoint_blobs", "checkpoint_writes"],
}


ROLES = ("checkpoint", "value", "write")
"""What each saver's three tables hold, in TABLES' order: where the bytes go, side by side."""


def stored_bytes(tables: list[str], thread_id: str) -> dict[str, int]:
    """The thread's rows as Postgres stores them (pg_column_size), per role."""
    with connection.cursor() as cursor:
        stored = {}
        for role, table in zip(ROLES, tables, strict=True):
            cursor.execute(
                f"SELECT COALESCE(SUM(pg_column_size(t.*)), 0) FROM {table} t WHERE thread_id = %s",
                [thread_id],
            )
            stored[f"storage_{role}_rows_bytes"] = int(cursor.fetchone()[0])
        return stored


def run(saver: Any, *, name: str, turns: int, attempt: int) -> dict[str, Any]:
    graph = conversation_graph(saver)
    thread_id = f"{name}-{turns}-{attempt}"
    config = {"configurable": {"thread_id": thread_id}}
    step_ms = []
    start = time.perf_counter()
    for _ in range(turns):
        t0 = time.perf_counter()
        graph.invoke({"messages": []}, config)
        step_ms.append((time.perf_counter() - t0) * 1000 / 4)  # four checkpoints a turn
    elapsed = time.perf_counter() - start
    state = graph.get_state(config)
    final = sum(len(saver.serde.dumps_typed(m)[1]) for m in state.values["messages"])
    loads = []
    for _ in range(20):
        t0 = time.perf_counter()
        graph.get_state(config)
        loads.append((time.perf_counter() - t0) * 1000)
    by_role = stored_bytes(TABLES[name], thread_id)
    storage = sum(by_role.values())
    return {
        "checkpoints_per_s": round(4 * turns / elapsed, 1),
        "ms_per_step_first_10": round(statistics.median(step_ms[:10]), 3),
        "ms_per_step_last_10": round(statistics.median(step_ms[-10:]), 3),
        "storage_bytes": storage,
        "final_state_bytes": final,
        "storage_ratio": round(storage / final, 2),
        **by_role,
        "get_state_ms_p50": round(statistics.median(loads), 3),
    }


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {key: round(statistics.median(r[key] for r in runs), 3) for key in runs[0]}


def compared(gatehouse: dict[str, Any], postgres: dict[str, Any]) -> dict[str, Any]:
    """GatehouseSaver against PostgresSaver, beside the targets (twice the rate, a tenth the storage)."""
    return {
        "checkpoints_per_s_x": round(gatehouse["checkpoints_per_s"] / postgres["checkpoints_per_s"], 2),
        "checkpoints_per_s_x_target": 2,
        "storage_less_x": round(postgres["storage_bytes"] / gatehouse["storage_bytes"], 2),
        "storage_less_x_target": 10,
    }


class Command(BaseCommand):
    help = "Benchmark GatehouseSaver against LangGraph's PostgresSaver on the same graph and database."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--turns", type=int, nargs="+", default=[50, 200])
        parser.add_argument("--runs", type=int, default=3, help="each figure is the median of this many")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if connection.vendor != "postgresql":  # skipped, so `make bench` goes on to the others
            reason = "bench_langgraph compares savers on PostgreSQL; set DATABASE_URL"
            self.stdout.write(json.dumps({"skipped": reason}) if options["json"] else reason)
            return
        results: dict[str, Any] = {}
        with bench_database(name="gatehouse_bench_langgraph", keep=False) as name:
            params = _params(connection.settings_dict, dbname=name)
            with Connection.connect(
                autocommit=True, prepare_threshold=0, row_factory=dict_row, **params
            ) as conn:
                postgres = PostgresSaver(conn)
                postgres.setup()
                gatehouse = GatehouseSaver()
                for turns in options["turns"]:
                    # Alternating savers, so a busy moment on a shared machine hits both alike.
                    runs: dict[str, list[dict[str, Any]]] = {"gatehouse": [], "postgres_saver": []}
                    for attempt in range(options["runs"]):
                        runs["gatehouse"].append(
                            run(gatehouse, name="gatehouse", turns=turns, attempt=attempt)
                        )
                        runs["postgres_saver"].append(
                            run(postgres, name="postgres_saver", turns=turns, attempt=attempt)
                        )
                    figures = {name: medians(each) for name, each in runs.items()}
                    results[f"T={turns}"] = {
                        **figures,
                        "runs": options["runs"],
                        **compared(figures["gatehouse"], figures["postgres_saver"]),
                    }
                gatehouse.close()
        self.stdout.write(json.dumps(results, indent=None if options["json"] else 2))
