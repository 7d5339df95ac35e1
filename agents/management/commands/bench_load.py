"""Load benchmark: N refund threads through the web server (uvicorn), W Celery workers and the offline model.

Every thread reaches its gate, every gate is approved over the HTTP API, every thread completes;
the report counts lost threads and duplicated refunds (both must be 0) and measures steps per
second and decision -> resume latency: with 100s of decisions at once, one at a time with nothing
else running (probe threads decided before the load) and one at a time while the N threads are
being started (people first). Runs in a database and a Redis of its own and cleans up.
"""

import contextlib
import json
import os
import shutil
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.db.models import Count
from django.utils.timezone import now

from agents.examples.models import Refund
from agents.management.commands.serve import child_env
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest
from checkpoints.models import Checkpoint, CheckpointSource, Thread
from config import embedded_redis
from config.celery import app as celery_app

ORDERS = ("ORD-1001", "ORD-1002", "ORD-1003", "ORD-1004")
HTTP_CLIENTS = 8


class Command(BaseCommand):
    help = (
        "Start N refund threads at once with W worker processes and the offline model; approve "
        "every gate over the API; report steps/s, decision->resume latency p50/p99, lost threads "
        "and duplicated side effects. Uses (and drops) its own database and Redis db."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--threads", type=int, default=500)
        parser.add_argument(
            "--workers",
            type=int,
            default=settings.STEP_WORKERS,
            help="step worker processes, each as `serve` starts it (STEP_WORKERS)",
        )
        parser.add_argument(
            "--pool",
            default=settings.STEP_POOL,
            help="the step workers' pool (STEP_POOL); prefork runs concurrency 1 per process",
        )
        parser.add_argument(
            "--model-delay-ms",
            type=int,
            default=settings.OFFLINE_MODEL_DELAY_MS,
            help="every model call takes this long (OFFLINE_MODEL_DELAY_MS)",
        )
        parser.add_argument("--database", default="gatehouse_bench_load", help="database to create")
        parser.add_argument("--redis-db", type=int, default=13, help="db of REDIS_URL's server to use")
        parser.add_argument(
            "--private-redis",
            action="store_true",
            help="start a Redis server of its own, even with REDIS_URL",
        )
        parser.add_argument(
            "--probes",
            type=int,
            default=20,
            help="gates decided one at a time, idle and then while the N threads start",
        )
        parser.add_argument("--timeout", type=float, default=900, help="seconds per phase")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        private = options["private_redis"] or settings.REDIS_EMBEDDED
        with bench_database(options["database"]), bench_redis(options["redis_db"], private) as redis_url:
            os.environ["OFFLINE_MODEL_DELAY_MS"] = str(options["model_delay_ms"])  # for the workers
            # Resume latency is from a decision taking effect, not from the click: no undo window.
            os.environ["DECISION_UNDO_S"] = "0"
            result = run(
                threads=options["threads"],
                workers=options["workers"],
                pool=options["pool"],
                model_delay_ms=options["model_delay_ms"],
                redis_url=redis_url,
                probes=options["probes"],
                timeout=options["timeout"],
            )
        if options["json"]:
            self.stdout.write(json.dumps(result))
        else:
            for key, value in result.items():
                self.stdout.write(f"{key:34} {value}")
        if result["lost_threads"] or result["duplicated_side_effects"]:
            raise CommandError("threads were lost or side effects duplicated")


@contextlib.contextmanager
def bench_database(name: str) -> Iterator[None]:
    """Create, migrate and switch to a fresh database (the test runner's machinery); drop it after."""
    original = connection.settings_dict["NAME"]
    if connection.vendor == "sqlite":
        name = str(settings.VAR_DIR / f"{name}.sqlite3")
    connection.settings_dict.setdefault("TEST", {})["NAME"] = name
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield
    finally:
        connection.creation.destroy_test_db(original, verbosity=0)


@contextlib.contextmanager
def bench_redis(db: int, private: bool) -> Iterator[str]:
    """REDIS_URL's server with another db (flushed before and after), or a server of its own."""
    server = None
    if private:
        from tests.live import free_port, log_dir

        port = free_port()
        with (log_dir() / "bench-redis.log").open("wb") as output:
            server = embedded_redis.start(port, output=output)
        url = f"redis://127.0.0.1:{port}/0"
    else:
        url = urlunsplit(urlsplit(settings.REDIS_URL)._replace(path=f"/{db}"))
    client = redis.Redis.from_url(url)
    client.flushdb()
    celery_app.conf.update(broker_url=url)  # so this process pings the bench's workers
    try:
        yield url
    finally:
        client.flushdb()
        client.close()
        if server is not None:
            embedded_redis.stop(server)
            shutil.rmtree(settings.VAR_DIR / f"redis-{port}", ignore_errors=True)


def run(
    *,
    threads: int,
    workers: int,
    pool: str,
    model_delay_ms: int,
    redis_url: str,
    probes: int,
    timeout: float,
) -> dict[str, Any]:
    from django.contrib.auth.models import User

    from tests.live import LiveServices, free_port, live_env

    port = free_port()
    env = {**live_env(port, f"gatehouse-bench-{uuid.uuid4().hex[:8]}"), "REDIS_URL": redis_url}
    # Django's advice for ASGI: no persistent connections in the web process (each request runs
    # in a thread of its own); `serve` gives it a pool instead, as here.
    web_env = {**env, "DB_CONN_MAX_AGE": "0", **child_env("web")}
    services = LiveServices(url=f"http://127.0.0.1:{port}", env=web_env)
    try:
        web = services.start_web(port)
        procs = start_workers(services, workers=workers, pool=pool)
        user = User.objects.create_superuser("bench", password=uuid.uuid4().hex)
        api = ThreadClients(
            base_url=f"{services.url}/api",
            headers={"Authorization": f"Bearer {do_create_token(user=user, name='bench')}"},
            timeout=60,
        )
        with api, Sampler(procs) as sampler:
            result = measure(
                api,
                threads=threads,
                workers=workers,
                probes=probes,
                timeout=timeout,
                cpu=lambda: {
                    "workers": cpu_s(procs),
                    "web": cpu_s([web]),
                    "postgres": postgres_cpu_s(),
                    "bench": {os.getpid(): pid_cpu_s(os.getpid())},  # its HTTP clients and polling
                },
            )
        return {
            **result,
            "pool": pool,
            **ideal(result, model_delay_ms=model_delay_ms),
            **sampler.peaks(),
        }
    finally:
        services.stop_all()


def start_workers(services: Any, *, workers: int, pool: str) -> list[Any]:
    """The step workers and the resume worker, configured as `serve` starts them."""
    env = {"DB_CONN_MAX_AGE": "60", **(child_env("worker") if pool == "threads" else {})}
    concurrency = settings.STEP_CONCURRENCY if pool == "threads" else 1
    procs = [
        services.start_worker(f"bench-{n + 1}", env, concurrency=concurrency, pool=pool, timeout=60)
        for n in range(workers)
    ]
    if settings.RESUME_QUEUE:
        resume = {"DB_CONN_MAX_AGE": "60", **child_env("resume")}
        procs.append(
            services.start_worker(
                "bench-resume",
                resume,
                concurrency=settings.RESUME_CONCURRENCY,
                pool="threads",
                queue=settings.RESUME_QUEUE,
                timeout=60,
            )
        )
    return procs


def ideal(result: dict[str, Any], *, model_delay_ms: int) -> dict[str, Any]:
    """The time to the gate if nothing but the model took time (its latency times the calls),
    and the machine's limit: the CPU the climb took, spread over every core."""
    ideal_s = round(result["model_calls_to_gate"] * model_delay_ms / 1000, 2)
    cpu_limit_s = round(result["to_gate_cpu_s"] / result["cores"], 2)
    return {
        "model_delay_ms": model_delay_ms,
        "to_gate_ideal_s": ideal_s,
        "to_gate_ratio": round(result["to_gate_s"] / ideal_s, 2) if ideal_s else None,
        "to_gate_cpu_limit_s": cpu_limit_s,
        "to_gate_vs_cpu_limit": round(result["to_gate_s"] / cpu_limit_s, 2) if cpu_limit_s else None,
    }


class ThreadClients:
    """The API's client, one httpx client (one connection) per bench thread. One client shared
    by more threads than its pool's connections lost a start now and then to
    `ReadError: Bad file descriptor`: httpcore's pool can close an idle connection it has just
    handed to a queued request (encode/httpcore#1110, open in httpcore 1.0.9)."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.local = threading.local()
        self.clients: list[httpx.Client] = []
        self.lock = threading.Lock()

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        client = getattr(self.local, "client", None)
        if client is None:
            client = self.local.client = httpx.Client(**self.options)
            with self.lock:
                self.clients.append(client)
        return client.post(url, **kwargs)

    def __enter__(self) -> "ThreadClients":
        return self

    def __exit__(self, *exc: object) -> None:
        for client in self.clients:
            client.close()


class Sampler:
    """Peaks, sampled every 0.25 s: steps holding a lease, Postgres connections, worker RSS."""

    def __init__(self, procs: list[Any]) -> None:
        self.procs = procs
        self.stop = threading.Event()
        self.in_flight = self.connections = self.rss = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def __enter__(self) -> "Sampler":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def run(self) -> None:
        from django.db import connections

        try:
            while not self.stop.wait(0.25):
                leased = Thread.objects.filter(lease_expires_at__gt=now()).count()
                self.in_flight = max(self.in_flight, leased)
                self.connections = max(self.connections, database_connections())
                self.rss = max(self.rss, sum(rss_kb(proc.pid) for proc in self.procs))
        finally:
            connections.close_all()

    def peaks(self) -> dict[str, Any]:
        return {
            "in_flight_peak": self.in_flight,
            "db_connections_peak": self.connections if connection.vendor == "postgresql" else None,
            "worker_rss_mb_peak": round(self.rss / 1024, 1),
        }


def database_connections() -> int:
    """Every session on the bench's database (the bench's own two included)."""
    if connection.vendor != "postgresql":
        return 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


def with_children(pid: int) -> list[int]:
    """A process and the processes it forked (a prefork pool)."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [pid, *(int(c) for c in children.read_text().split())] if children.exists() else [pid]


def cpu_s(procs: list[Any]) -> dict[int, float]:
    """CPU seconds used so far by these processes and their pool children (pid -> s)."""
    return {pid: pid_cpu_s(pid) for proc in procs for pid in with_children(proc.pid)}


def pid_cpu_s(pid: int) -> float:
    """User and system CPU seconds one process has used so far (0 once it is gone)."""
    with contextlib.suppress(OSError):
        # utime and stime: fields 14 and 15, counted after the parenthesised name.
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def postgres_cpu_s() -> dict[int, float]:
    """CPU seconds so far of each of this database's Postgres sessions (pid -> s), when the server
    runs on this machine (else none). The pools' sessions live through the run."""
    if connection.vendor != "postgresql":
        return {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        pids = [pid for (pid,) in cursor]
    return {pid: pid_cpu_s(pid) for pid in pids if _is_local_postgres(pid)}


def _is_local_postgres(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "postgres"
    except OSError:  # not on this machine, or gone
        return False


Readings = dict[str, dict[int, float]]
"""Each group's processes' CPU seconds so far (pid -> s)."""


def cpu_spent_s(before: Readings, after: Readings) -> dict[str, float | None]:
    """Each group's CPU seconds between two readings: a process started meanwhile counts from its
    start; None for a group with no process on this machine (a remote Postgres)."""
    return {
        name: sum(s - before[name].get(pid, 0.0) for pid, s in reading.items()) if reading else None
        for name, reading in after.items()
    }


def cpu_ms_per_step(before: Readings, after: Readings, *, steps: int) -> dict[str, float | None]:
    return {
        name: None if spent is None else round(spent * 1000 / steps, 2)
        for name, spent in cpu_spent_s(before, after).items()
    }


def machine_cpu_s() -> tuple[float, float]:
    """Busy and all core-seconds of the whole machine so far (/proc/stat; zeros off Linux): busy
    is everything but idle and I/O wait, the kernel's network work for every process included."""
    with contextlib.suppress(OSError):
        ticks = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        hz = os.sysconf("SC_CLK_TCK")
        return (sum(ticks) - ticks[3] - ticks[4]) / hz, sum(ticks) / hz
    return 0.0, 0.0


def busy_fraction(before: tuple[float, float], after: tuple[float, float]) -> float | None:
    """The share of the machine's core-seconds between two readings that were busy."""
    elapsed = after[1] - before[1]
    return round((after[0] - before[0]) / elapsed, 2) if elapsed else None


def rss_kb(pid: int) -> int:
    """The resident memory of a process and the processes it forked (a prefork pool)."""
    total = 0
    for each in with_children(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


def measure(
    api: ThreadClients,
    *,
    threads: int,
    workers: int,
    probes: int,
    timeout: float,
    cpu: Callable[[], Readings],
) -> dict[str, Any]:
    probe_ids = parallel(lambda n: start(api, n), range(2 * probes))
    if not wait_until(lambda: status_count(probe_ids, "waiting") == len(probe_ids), timeout=timeout):
        raise CommandError("the probe threads did not reach their gates")
    probe_gates = list(ApprovalRequest.objects.filter(thread_id__in=probe_ids, status="pending"))
    idle = one_at_a_time(api, probe_gates[:probes], timeout=timeout)

    cpu_before, probe_steps_before, machine_before = cpu(), worker_steps(probe_ids), machine_cpu_s()
    started = time.monotonic()
    with ThreadPoolExecutor(1) as background:
        starting = background.submit(parallel, lambda n: start(api, n), range(threads))
        under_load = one_at_a_time(api, probe_gates[probes:], timeout=timeout, until=starting.done)
        ids = starting.result()
    started_s = time.monotonic() - started
    waiting = wait_until(lambda: status_count(ids, "waiting") == threads, timeout=timeout)
    gated_s = time.monotonic() - started
    cpu_gated, machine_gated = cpu(), machine_cpu_s()
    steps_gate = worker_steps(ids)
    gate_calls = Checkpoint.objects.filter(
        thread_id__in=ids, node="model", created_by__startswith="worker:"
    ).count()

    decided = time.monotonic()
    requests = list(
        ApprovalRequest.objects.filter(thread_id__in=ids, status="pending").values_list("pk", flat=True)
    )
    answers = parallel(lambda pk: decide(api, pk), requests)
    decisions_s = time.monotonic() - decided
    done = wait_until(lambda: status_count(ids, "done") == threads, timeout=timeout)
    finished_s = time.monotonic() - decided
    steps_done = worker_steps(ids) - steps_gate
    cpu_after, probe_steps = cpu(), worker_steps(probe_ids) - probe_steps_before

    latencies = resume_latencies_ms(requests=ApprovalRequest.objects.filter(pk__in=requests))
    refunds = Refund.objects.values("thread_id").annotate(n=Count("id"))
    cores = os.cpu_count() or 1
    steps = steps_gate + steps_done
    return {
        "threads": threads,
        "workers": workers,
        "cores": cores,
        "database": connection.vendor,
        "started_via_api_s": round(started_s, 2),
        "all_at_gate": waiting,
        "to_gate_s": round(gated_s, 2),
        # The stack's CPU until every thread was at its gate (workers, web, Postgres, the bench's
        # clients), and how busy the machine's cores were meanwhile: near 1, the cores are the limit.
        "to_gate_cpu_s": round(sum(filter(None, cpu_spent_s(cpu_before, cpu_gated).values())), 2),
        "to_gate_machine_busy": busy_fraction(machine_before, machine_gated),
        "decisions_via_api": sum(1 for ok in answers if ok),
        "decisions_s": round(decisions_s, 2),
        "all_done": done,
        "to_done_after_decisions_s": round(finished_s, 2),
        "worker_steps": steps,
        "model_calls_to_gate": round(gate_calls / max(threads, 1), 2),
        "steps_per_s": round(steps / (gated_s + finished_s), 1),
        "steps_per_s_per_core": round(steps / (gated_s + finished_s) / cores, 1),
        "steps_per_s_per_worker": round(steps / (gated_s + finished_s) / workers, 1),
        # Where a step's CPU goes: the workers run it; the web process serves the API's starts
        # and decisions and the offline model's replies; Postgres's sessions and the bench's own
        # client share the machine (the probes' steps ran meanwhile too).
        "cpu_ms_per_step": cpu_ms_per_step(cpu_before, cpu_after, steps=steps + probe_steps),
        "resume_latency_ms_p50": percentile(latencies, 50),
        "resume_latency_ms_p99": percentile(latencies, 99),
        "resume_latency_ms_max": round(max(latencies), 1) if latencies else None,
        "resume_idle_ms_p50": percentile(idle, 50),
        "resume_idle_ms_p99": percentile(idle, 99),
        "resume_under_load_ms_p50": percentile(under_load, 50),
        "resume_under_load_ms_p99": percentile(under_load, 99),
        "resumes_under_load": len(under_load),
        "lost_threads": len(ids) + len(probe_ids) - status_count([*ids, *probe_ids], "done"),
        "failed_threads": Thread.objects.filter(status="failed").count(),
        "refunds": Refund.objects.filter(thread_id__in=ids).count(),
        "duplicated_side_effects": sum(row["n"] - 1 for row in refunds),
    }


def parallel(fn: Any, items: Any) -> list[Any]:
    with ThreadPoolExecutor(HTTP_CLIENTS) as pool:
        return list(pool.map(fn, items))


def start(api: ThreadClients, n: int) -> str:
    body = {"agent": "refunds", "input": f"Please refund order {ORDERS[n % len(ORDERS)]}"}
    response = api.post("/threads", json=body)
    if response.status_code != 201:
        raise CommandError(f"starting thread {n}: {response.status_code} {response.text}")
    return str(response.json()["id"])


def decide(api: ThreadClients, pk: int) -> bool:
    return api.post(f"/approvals/{pk}/decision", json={"decision": "approve"}).status_code == 200


def status_count(ids: list[str], status: str) -> int:
    return Thread.objects.filter(pk__in=ids, status=status).count()


def one_at_a_time(
    api: ThreadClients,
    gates: list[ApprovalRequest],
    *,
    timeout: float,
    until: Any = lambda: False,
) -> list[float]:
    """Decide each gate and wait for its thread to resume before the next: no decision backlog.
    Once `until()` is true (the load it runs beside is over), the rest are decided unmeasured."""
    decided = []
    for n, gate in enumerate(gates):
        if until():
            parallel(lambda g: decide(api, g.pk), gates[n:])
            break
        decide(api, gate.pk)
        resumed = Checkpoint.objects.filter(source=CheckpointSource.RESUME, parent_id=gate.checkpoint_id)
        if not wait_until(resumed.exists, timeout=timeout, every=0.005):
            raise CommandError(f"thread {gate.thread_id} did not resume")
        decided.append(gate.pk)
    return resume_latencies_ms(requests=ApprovalRequest.objects.filter(pk__in=decided))


def wait_until(predicate: Any, *, timeout: float, every: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline or Thread.objects.filter(status="failed").exists():
            return False
        time.sleep(every)
    return True


def worker_steps(ids: list[str]) -> int:
    return Checkpoint.objects.filter(thread_id__in=ids, created_by__startswith="worker:").count()


def resume_latencies_ms(*, requests: Any) -> list[float]:
    """From each decision's commit to the commit of the step that resumed its thread."""
    decided = dict(requests.exclude(decided_at=None).values_list("checkpoint_id", "decided_at"))
    resumed = Checkpoint.objects.filter(source=CheckpointSource.RESUME, parent_id__in=decided)
    return [
        (created - decided_at).total_seconds() * 1000
        for parent, created in resumed.values_list("parent_id", "created_at")
        if (decided_at := decided.get(parent)) is not None
    ]


def percentile(values: list[float], pct: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 1)
    return round(statistics.quantiles(values, n=100, method="inclusive")[pct - 1], 1)
