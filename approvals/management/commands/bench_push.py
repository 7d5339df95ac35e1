"""Push benchmark: N reviewer inbox sockets on a live web server, M gates opened one after another.

Reports, for each N, gate -> socket latency p50/p99 (from just before the gate's transaction to
the socket receiving its row) and the queries the web server ran per gate (config.query_count), beside
the targets: p50 <= 250 ms, p99 <= 1 s, queries per gate independent of N. Runs in a database and
a Redis of its own (bench_load's) and cleans up.
"""

import asyncio
import copy
import json
import re
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import websockets
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection
from django.test import Client, override_settings

from agents.management.commands.bench_load import bench_database, bench_redis, percentile

TARGET_P50_MS, TARGET_P99_MS = 250, 1000
ROW = re.compile(r'id="approval-(\d+)"')


class Command(BaseCommand):
    help = "Gate -> inbox socket latency and queries per gate, for 1 and 50 reviewer sockets."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sockets", type=int, nargs="+", default=[1, 50])
        parser.add_argument("--gates", type=int, default=20)
        parser.add_argument("--database", default="gatehouse_bench_push")
        parser.add_argument("--redis-db", type=int, default=13)
        parser.add_argument("--private-redis", action="store_true")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        private = options["private_redis"] or settings.REDIS_EMBEDDED
        with bench_database(options["database"]), bench_redis(options["redis_db"], private) as redis_url:
            result = run(sockets=options["sockets"], gates=options["gates"], redis_url=redis_url)
        if options["json"]:
            self.stdout.write(json.dumps(result))
        else:
            for key, value in result.items():
                self.stdout.write(f"{key:34} {value}")


def run(*, sockets: list[int], gates: int, redis_url: str) -> dict[str, Any]:
    from channels.layers import channel_layers

    from tests.factories import make_user
    from tests.live import LiveServices, free_port, live_env

    port, prefix = free_port(), f"gatehouse-bench-{uuid.uuid4().hex[:8]}"
    counter = Path(tempfile.mkdtemp()) / "queries"
    env = {**live_env(port, prefix), "REDIS_URL": redis_url, "DB_CONN_MAX_AGE": "0"}
    extra = {"QUERY_COUNT_FILE": str(counter), "LIVE_REJOIN_S": "3600"}  # no periodic refresh mid-run
    services = LiveServices(url=f"http://127.0.0.1:{port}", env=env)
    layers: dict[str, Any] = copy.deepcopy(settings.CHANNEL_LAYERS)
    layers["default"]["CONFIG"].update(prefix=prefix, hosts=[{"address": redis_url, "socket_timeout": None}])
    with override_settings(CHANNEL_LAYERS=layers):
        channel_layers.backends = {}  # this process sends the gates' events to the bench's layer
        try:
            services.start_web(port, extra_env=extra)
            make_user("bench-reviewer", "reviewer")
            client = Client()
            assert client.login(username="bench-reviewer", password="pw-for-tests-only")
            cookie = client.cookies["sessionid"].value
            result: dict[str, Any] = {"gates": gates}
            for n in sockets:
                result[f"sockets_{n}"] = asyncio.run(
                    measure(services.url, cookie, n=n, gates=gates, counter=counter)
                )
            return {**result, **ratios(result, sockets)}
        finally:
            services.stop_all()
            channel_layers.backends = {}


def closing(fn: Any) -> Any:
    """fn, closing its thread's database connection after (so the bench database can be dropped)."""

    def call() -> Any:
        try:
            return fn()
        finally:
            connection.close()

    return call


def ratios(result: dict[str, Any], sockets: list[int]) -> dict[str, Any]:
    most, fewest = result[f"sockets_{max(sockets)}"], result[f"sockets_{min(sockets)}"]
    return {
        "p50_to_target": round(most["latency_ms_p50"] / TARGET_P50_MS, 2),
        "p99_to_target": round(most["latency_ms_p99"] / TARGET_P99_MS, 2),
        f"queries_per_gate_{max(sockets)}_to_{min(sockets)}": round(
            most["queries_per_gate"] / max(fewest["queries_per_gate"], 1e-9), 2
        ),
    }


async def measure(url: str, cookie: str, *, n: int, gates: int, counter: Path) -> dict[str, Any]:
    from approvals.models import ApprovalRequest
    from config import query_count
    from tests.factories import make_gate

    ws_url = url.replace("http://", "ws://") + "/ws/inbox/"
    headers = {"Cookie": f"sessionid={cookie}"}
    origin: Any = url  # websockets wants its Origin type: a str
    conns = [
        await websockets.connect(ws_url, additional_headers=headers, origin=origin, max_size=None)
        for _ in range(n)
    ]
    for ws in conns:
        await asyncio.wait_for(ws.recv(), 30)  # the catch-up list
    arrived: list[dict[int, float]] = [{} for _ in conns]

    async def listen(ws: Any, seen: dict[int, float]) -> None:
        async for message in ws:
            now = time.monotonic()
            for pk in ROW.findall(str(message)):
                seen.setdefault(int(pk), now)

    listeners = [asyncio.create_task(listen(ws, seen)) for ws, seen in zip(conns, arrived, strict=True)]
    latencies, before = [], query_count.read(str(counter))
    for _ in range(gates):
        started = time.monotonic()
        request_: ApprovalRequest = await asyncio.to_thread(closing(make_gate))
        deadline = time.monotonic() + 10
        while any(request_.pk not in seen for seen in arrived) and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        latencies += [(seen.get(request_.pk, deadline) - started) * 1000 for seen in arrived]
    await asyncio.sleep(0.5)  # straggling queries
    queries = query_count.read(str(counter)) - before
    for task in listeners:
        task.cancel()
    for ws in conns:
        await ws.close()
    return {
        "sockets": n,
        "latency_ms_p50": round(percentile(latencies, 50) or 0, 1),
        "latency_ms_p99": round(percentile(latencies, 99) or 0, 1),
        "queries_per_gate": round(queries / gates, 1),
    }
