"""`manage.py serve`: everything Gatehouse needs, in the foreground.

Starts the embedded Redis (when no REDIS_URL is set), the web server (uvicorn), STEP_WORKERS
Celery workers for steps (STEP_POOL: threads on Postgres, one process per core), one for steps
resumed by people (RESUME_QUEUE), a thread-pool worker for notifications (NOTIFY_QUEUE) and
Celery beat as child processes, prefixes their output, and stops them all on Ctrl-C or SIGTERM.
If any child dies the rest are stopped and serve exits non-zero. `--only workers` (or web, or
beat, comma-separated) starts part of it: a further host runs only workers against the same
Postgres and Redis, and one host in the deployment runs beat.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
from argparse import ArgumentTypeError
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from config import embedded_redis

PARTS = ("web", "workers", "beat")


class Command(BaseCommand):
    help = "Run the web server, Celery workers and Celery beat (plus the embedded Redis if needed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--only",
            type=parts,
            default=PARTS,
            help="start only these, comma-separated: web, workers (steps, resumes, notifications), beat",
        )

    def handle(self, *args: Any, only: tuple[str, ...], **options: Any) -> None:
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.pumps: list[threading.Thread] = []
        self.output_lock = threading.Lock()
        stopping = threading.Event()
        # Children run in their own process group so Ctrl-C reaches only us and we stop them
        # in order (web first, Redis last) instead of everything dying at once.
        signal.signal(signal.SIGINT, lambda *_: stopping.set())
        signal.signal(signal.SIGTERM, lambda *_: stopping.set())

        port = settings.PORT
        try:
            if settings.REDIS_EMBEDDED:
                self.start_redis(settings.EMBEDDED_REDIS_PORT)
            for name, command in child_commands(port, only=only).items():
                self.spawn(name, command, child_env(name.rstrip("0123456789")))  # worker2 -> worker
            if "web" not in only:
                self.log("serve", f"started {', '.join(self.children)}; press Ctrl-C to stop.")

            announced = "web" not in only  # nothing to announce on a port
            while not stopping.wait(0.5):
                dead = [
                    f"{n} (exit {p.returncode})" for n, p in self.children.items() if p.poll() is not None
                ]
                if dead:
                    raise CommandError(f"{', '.join(dead)} stopped unexpectedly; stopping the rest")
                if not announced and port_open(settings.WEB_LOCAL_HOST, port):
                    announced = True
                    self.announce()
        finally:
            self.stop_all()

    def start_redis(self, port: int) -> None:
        if embedded_redis.ping(port):
            self.log("serve", f"reusing the Redis already answering on 127.0.0.1:{port}")
            return
        try:
            process = embedded_redis.start(port, output=subprocess.PIPE)
        except RuntimeError as exc:
            raise CommandError(
                f"{exc}\n(Is something else using the port? Set EMBEDDED_REDIS_PORT.)"
            ) from exc
        self.children["redis"] = process
        self.forward("redis", process)

    def spawn(self, name: str, command: list[str], extra_env: dict[str, str]) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **extra_env}  # unbuffered: lines as they happen
        process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            process_group=0,
            preexec_fn=embedded_redis.die_with_parent,
        )
        self.children[name] = process
        self.forward(name, process)

    def forward(self, name: str, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        stream: IO[bytes] = process.stdout

        def pump() -> None:
            for line in stream:
                self.log(name, line.decode(errors="replace").rstrip())

        thread = threading.Thread(target=pump, name=f"output-{name}", daemon=True)
        thread.start()
        self.pumps.append(thread)

    def log(self, name: str, text: str) -> None:
        with self.output_lock:
            self.stdout.write(f"{name:>7} | {text}")
            self.stdout.flush()

    def announce(self) -> None:
        # Not the generated passwords' file: after a run with DEMO_PASSWORD, or an admin's change,
        # they no longer log in; seed_demo's table says what does.
        how = (
            "the DEMO_PASSWORD"
            if os.environ.get("DEMO_PASSWORD")
            else "the passwords seed_demo printed (`manage.py seed_demo` shows them again; "
            "it changes no password)"
        )
        self.log("serve", f"Gatehouse is up: {settings.WEB_LOCAL_URL}/")
        self.log("serve", f"Log in as reviewer, operator or admin with {how}.")
        self.log("serve", "Press Ctrl-C to stop.")

    def stop_all(self) -> None:
        redis = self.children.pop("redis", None)
        # Web, worker and beat together first; the Redis they talk to last.
        for batch in (list(self.children.items()), [("redis", redis)] if redis else []):
            running = [(name, process) for name, process in batch if process.poll() is None]
            for name, process in running:
                self.log("serve", f"stopping {name}")
                process.terminate()
            for _, process in running:
                try:
                    process.wait(10)  # a worker finishes its current step first
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for pump in self.pumps:
            pump.join(timeout=1)  # let the last lines of output through


def parts(value: str) -> tuple[str, ...]:
    """`--only`'s value: some of PARTS, comma-separated."""
    chosen = tuple(part.strip() for part in value.split(",") if part.strip())
    unknown = sorted(set(chosen) - set(PARTS))
    if unknown or not chosen:
        raise ArgumentTypeError(f"choose from {', '.join(PARTS)} (comma-separated), not {value!r}")
    return chosen


def child_commands(port: int, *, only: tuple[str, ...] = PARTS) -> dict[str, list[str]]:
    """The processes to start, by name: those of the parts in `only` (web, workers, beat)."""
    python = [sys.executable, "-m"]  # the same interpreter and venv as this process
    schedule = str(Path(settings.VAR_DIR) / "celerybeat-schedule")
    worker = [*python, "celery", "-A", "config", "worker", "-l", "info"]
    worker += ["--without-gossip", "--without-mingle"]
    commands = {
        "web": web_command(port, host=settings.WEB_HOST),
        **{f"worker{n}": [*worker, "-n", f"worker{n}@%h", *step_worker_options()] for n in step_workers()},
        "resume": [*worker, "-n", "resume@%h", *resume_worker_options()],
        "notify": [*worker, "-n", "notify@%h", *notify_worker_options()],
        "beat": [*python, "celery", "-A", "config", "beat", "-l", "info", "-s", schedule],
    }
    if not settings.RESUME_QUEUE:  # resumed steps share the steps' queue
        del commands["resume"]
    if not settings.NOTIFY_QUEUE:  # notifications share the steps' queue and worker
        del commands["notify"]
    part = {"web": "web", "beat": "beat"}  # every other process is a worker
    return {name: command for name, command in commands.items() if part.get(name, "workers") in only}


def web_command(port: int, *, host: str = "127.0.0.1") -> list[str]:
    """uvicorn serving the ASGI app (HTTP and the inbox's WebSockets) in one process.

    Its C HTTP parser and event loop (httptools, uvloop) cost about a fifth less CPU per request
    than daphne's Twisted (docs/architecture.md). The login throttle counts failures per client
    address, so X-Forwarded-For is believed only from FORWARDED_ALLOW_IPS (uvicorn's own default
    would believe 127.0.0.1). Idle keep-alive connections stay open 75 s, not uvicorn's 5, so a
    client (a worker's model client) rarely sends on a connection the server is closing.
    """
    proxies = settings.FORWARDED_ALLOW_IPS
    return [
        *(sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", host, "--port", str(port)),
        *("--http", "httptools", "--loop", "uvloop", "--ws", "websockets-sansio"),
        *(("--proxy-headers", "--forwarded-allow-ips", proxies) if proxies else ("--no-proxy-headers",)),
        *("--lifespan", "off", "--no-server-header", "--no-access-log", "--timeout-keep-alive", "75"),
    ]


def child_env(name: str) -> dict[str, str]:
    """The web server and thread-pool workers share a bounded pool of Postgres connections."""
    sizes = {
        "web": settings.WEB_DB_POOL_SIZE,
        "resume": settings.RESUME_DB_POOL_SIZE,
        "notify": settings.NOTIFY_DB_POOL_SIZE,
        **({"worker": settings.STEP_DB_POOL_SIZE} if settings.STEP_POOL == "threads" else {}),
    }
    if name in sizes and is_postgres():
        return {"DB_POOL_MAX_SIZE": str(sizes[name])}
    return {}


def is_postgres() -> bool:
    return bool(settings.DATABASES["default"]["ENGINE"].endswith("postgresql"))


def step_workers() -> range:
    """The step workers' numbers, 1 to STEP_WORKERS: one thread-pool process per core."""
    return range(1, settings.STEP_WORKERS + 1)


def step_worker_options() -> list[str]:
    """The steps' queue and RESUME_QUEUE (CELERY_TASK_QUEUES), in STEP_POOL (docs/architecture.md)."""
    return ["--pool", settings.STEP_POOL, "--concurrency", str(settings.STEP_CONCURRENCY)]


def resume_worker_options() -> list[str]:
    """RESUME_QUEUE only, with threads of its own: a person's step never waits behind new threads."""
    threads = str(settings.RESUME_CONCURRENCY)
    return ["-Q", settings.RESUME_QUEUE, "--pool", "threads", "--concurrency", threads]


def notify_worker_options() -> list[str]:
    """A worker for the notify queue only: threads, since a notification waits on a receiver."""
    threads = str(settings.NOTIFY_CONCURRENCY)
    return ["-Q", settings.NOTIFY_QUEUE, "--pool", "threads", "--concurrency", threads]


def port_open(host: str, port: int) -> bool:
    """Whether the web server answers at `host` (WEB_LOCAL_HOST: where this host reaches it)."""
    try:
        socket.create_connection((host, port), timeout=0.2).close()
    except OSError:
        return False
    return True
