"""Helpers for integration tests against real services: uvicorn, Celery workers, Redis, the test DB.

The fixtures in tests/conftest.py build a LiveServices; fault tests use it to start extra workers
(e.g. with OFFLINE_MODEL_DELAY_MS) and SIGKILL them. Every child writes its output to
VAR_DIR/test-logs/<name>.log, and start-up failures include the tail of that log.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db import connection

from agents.management.commands.serve import web_command
from config import embedded_redis

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T], timeout: float = 10, interval: float = 0.05, message: str = "condition"
) -> T:
    """Poll until predicate() is truthy and return its value; AssertionError after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {message}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_dir() -> Path:
    path = Path(settings.VAR_DIR) / "test-logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"(no log at {path})"
    return f"--- last {lines} lines of {path} ---\n" + "\n".join(text.splitlines()[-lines:])


def database_url_for_tests() -> str:
    """A DATABASE_URL for the test database, as it is after pytest-django created it."""
    name = connection.settings_dict["NAME"]
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(name).resolve()}"
    return urlunsplit(urlsplit(settings.DATABASE_URL)._replace(path=f"/{name}"))


def live_env(port: int, channels_prefix: str) -> dict[str, str]:
    """The environment for child processes: this test run's database, Redis and channel prefix."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url_for_tests(),
        "EMBEDDED_REDIS_PORT": str(settings.EMBEDDED_REDIS_PORT),
        "PORT": str(port),
        "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/offline/v1",
        "CHANNELS_PREFIX": channels_prefix,
        "PYTHONUNBUFFERED": "1",
    }
    if settings.REDIS_EMBEDDED:
        env.pop("REDIS_URL", None)  # the children derive the same embedded URL from the port
    else:
        env["REDIS_URL"] = settings.REDIS_URL
    return env


def http_get(url: str, timeout: float = 2) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def worker_node(name: str) -> str:
    return f"{name}@{socket.gethostname()}"


def live_workers() -> set[str]:
    """Node names of the Celery workers answering a broadcast ping right now."""
    from config.celery import app

    return {node for reply in app.control.ping(timeout=0.5) or [] for node in reply}


@dataclass
class LiveServices:
    url: str
    env: dict[str, str]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: dict[int, Path] = field(default_factory=dict)  # pid -> log file

    def spawn(
        self, name: str, command: list[str], extra_env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log = log_dir() / f"{name}.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                command,
                cwd=settings.BASE_DIR,
                env={**self.env, **(extra_env or {})},
                stdin=subprocess.DEVNULL,  # never pytest's stdin
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: kill() takes pool children along
                preexec_fn=embedded_redis.die_with_parent,
            )
        self.processes.append(process)
        self.logs[process.pid] = log
        return process

    def log_tail(self, process: subprocess.Popen[bytes], lines: int = 60) -> str:
        return tail(self.logs[process.pid], lines)

    def start_web(
        self, port: int, timeout: float = 30, extra_env: Mapping[str, str] | None = None, name: str = "web"
    ) -> subprocess.Popen[bytes]:
        command = web_command(port)
        process = self.spawn(name, command, extra_env)
        last: tuple[int, bytes] | str = "no answer"
        url = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            nonlocal last
            if process.poll() is not None:
                raise RuntimeError(f"the web server exited with {process.returncode}")
            try:
                last = http_get(f"{url}/healthz")
            except OSError as exc:
                last = str(exc)
                return False
            return last[0] == 200

        self._wait_started(process, healthy, timeout, lambda: f"/healthz on {url} (last: {last!r})")
        return process

    def start_worker(
        self,
        name: str,
        extra_env: Mapping[str, str] | None = None,
        *,
        concurrency: int = 2,
        timeout: float = 30,
        pool: str = "prefork",
        queue: str | None = None,
    ) -> subprocess.Popen[bytes]:
        """A Celery worker named `name`; returns once it answers a control ping."""
        node = worker_node(name)
        command = [
            *(sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "info", "-n", node),
            *(("-Q", queue) if queue else ()),
            *(
                "--pool",
                pool,
                "--concurrency",
                str(concurrency),
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ),
        ]
        return self._start_celery_worker(name, command, extra_env, timeout=timeout)

    def start_notify_worker(
        self, name: str, extra_env: Mapping[str, str] | None = None, *, timeout: float = 30
    ) -> subprocess.Popen[bytes]:
        """A worker for the notify queue only, started with the options and pool `serve` gives it."""
        from agents.management.commands.serve import child_env, notify_worker_options

        command = [
            *(sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "info"),
            *("-n", worker_node(name), *notify_worker_options()),
            *("--without-gossip", "--without-mingle", "--without-heartbeat"),
        ]
        return self._start_celery_worker(
            name, command, {**child_env("notify"), **(extra_env or {})}, timeout=timeout
        )

    def _start_celery_worker(
        self, name: str, command: list[str], extra_env: Mapping[str, str] | None, *, timeout: float
    ) -> subprocess.Popen[bytes]:
        node = worker_node(name)
        process = self.spawn(f"worker-{name}", command, extra_env)

        def answering() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"worker {node} exited with {process.returncode}")
            return node in live_workers()

        self._wait_started(process, answering, timeout, lambda: f"worker {node} to answer a ping")
        return process

    def _wait_started(
        self,
        process: subprocess.Popen[bytes],
        ready: Callable[[], bool],
        timeout: float,
        what: Callable[[], str],
    ) -> None:
        try:
            wait_for(ready, timeout=timeout, interval=0.2, message="start-up")
        except (AssertionError, RuntimeError) as exc:
            self.stop(process)
            raise RuntimeError(f"{exc} ({what()})\n{self.log_tail(process)}") from None

    def kill(self, process: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
        """Signal the process and everything it forked (a worker's pool), like a machine dying."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            process.wait(10)

    def stop(self, process: subprocess.Popen[bytes], timeout: float = 10) -> None:
        """A graceful SIGTERM (a worker finishes its current step), then SIGKILL after timeout."""
        if process.poll() is None:
            process.terminate()
        self._reap(process, timeout)

    def stop_all(self) -> None:
        running = [p for p in self.processes if p.poll() is None]
        for process in running:
            process.terminate()
        for process in self.processes:
            self._reap(process, timeout=10)

    def _reap(self, process: subprocess.Popen[bytes], timeout: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout)
        # SIGKILL whatever is left in its process group, including orphaned pool processes.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


# --- Fault-test helpers (issue 6) -------------------------------------------------------------


@contextlib.contextmanager
def other_workers_paused() -> Iterator[None]:
    """Stop every worker alive now from taking new tasks off the steps', resume and notify queues while
    the block runs, so the workers a fault test starts (and kills) are the only ones at work."""
    from config.celery import app

    queues = [
        app.conf.task_default_queue,
        *([settings.NOTIFY_QUEUE] if settings.NOTIFY_QUEUE else []),
        *([settings.RESUME_QUEUE] if settings.RESUME_QUEUE else []),
    ]
    paused = {queue: consumers_of(queue) for queue in queues}
    for queue, nodes in paused.items():
        if nodes:
            app.control.cancel_consumer(queue, destination=nodes, reply=True, timeout=2)
    try:
        yield
    finally:
        for queue, nodes in paused.items():
            if nodes:  # only where it was consumed: a step worker must not start taking notifications
                app.control.add_consumer(queue, destination=nodes, reply=True, timeout=2)


def consumers_of(queue: str) -> list[str]:
    """Node names of the live workers consuming the queue."""
    from config.celery import app

    replies = app.control.inspect(timeout=1).active_queues() or {}
    return sorted(node for node, active in replies.items() if any(q["name"] == queue for q in active))


def pool_children(process: subprocess.Popen[bytes]) -> list[int]:
    """The pids a worker's main process forked (its prefork pool)."""
    path = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    return [int(pid) for pid in path.read_text().split()] if path.exists() else []


class TcpProxy:
    """Forwards 127.0.0.1:port to target_port until frozen: then every byte in either direction
    waits, as if the network went silent (a process stuck on a socket, not refused)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.flowing = threading.Event()
        self.flowing.set()
        self.closed = False
        self.sockets: list[socket.socket] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        self.flowing.clear()

    def close(self) -> None:
        self.closed = True
        self.flowing.set()
        for sock in [self.server, *self.sockets]:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.server.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                return
            self.sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                self.flowing.wait()
                if self.closed:
                    return
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


class ModelServer:
    """The offline model's rules served from the test process over real HTTP, counting the
    requests it answers; `hold(after=n)` makes every answer after the first n wait until
    `release()`."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        server = self
        self.requests = 0
        self.held_after: int | None = None
        self.open = threading.Event()
        self.open.set()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                from agents.offline import rules
                from agents.offline.server import completion, parse_request

                body = parse_request(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests += 1
                if server.held_after is None or server.requests > server.held_after:
                    server.open.wait(60)
                message = rules.reply(body["messages"], body.get("tools") or [])
                answer = completion(message, model="gatehouse-offline", messages=body["messages"])
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def hold(self, *, after: int = 0) -> None:
        self.held_after = after
        self.open.clear()

    def release(self) -> None:
        self.open.set()

    def close(self) -> None:
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()


@dataclass
class Workers:
    """Workers a fault test starts; stop_all() at teardown SIGKILLs what is left of them."""

    services: LiveServices
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(
        self, name: str, env: Mapping[str, str], concurrency: int = 1, pool: str = "prefork"
    ) -> subprocess.Popen[bytes]:
        process = self.services.start_worker(name, env, concurrency=concurrency, pool=pool)
        self.started.append(process)
        return process

    def start_notify(self, name: str, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        process = self.services.start_notify_worker(name, env)
        self.started.append(process)
        return process

    def stop_all(self) -> None:
        for process in self.started:
            self.services.kill(process)


def start_thread(text: str, agent: str = "refunds") -> str:
    """Start a thread as the test user would (the first step is enqueued on commit)."""
    from agents.actions import check_start_thread, do_start_thread

    definition = check_start_thread(agent=agent, text=text, thread_id=None)
    return do_start_thread(agent=definition, text=text, thread_id=None, actor="user:tests")[0].id


def thread_status(thread_id: str) -> str:
    from checkpoints.models import Thread

    return str(Thread.objects.values_list("status", flat=True).get(pk=thread_id))


def reach(thread_id: str, status: str, *, timeout: float = 45, reconcile: bool = True) -> None:
    """Wait for the thread to reach status, running the reconciler (as beat would) meanwhile."""
    from agents.tasks import reconcile_threads_task

    def reached() -> bool:
        if reconcile:
            reconcile_threads_task()
        current = thread_status(thread_id)
        assert current != "failed" or status == "failed", f"thread {thread_id} failed"
        return current == status

    wait_for(reached, timeout=timeout, interval=0.5, message=f"thread {thread_id} to be {status}")


def approve_pending(thread_id: str, username: str = "fault-reviewer") -> int:
    """Approve every pending request of the thread as a reviewer; return how many."""
    from django.contrib.auth.models import User

    from approvals.actions.decisions import check_decision, do_decide
    from approvals.models import ApprovalRequest

    reviewer = User.objects.filter(username=username).first()
    if reviewer is None:
        from tests.factories import make_user

        reviewer = make_user(username, "reviewer")
    pending = list(ApprovalRequest.objects.filter(thread_id=thread_id, status="pending"))
    for request_ in pending:
        do_decide(
            request_, reviewer=reviewer, valid=check_decision(request_, user=reviewer, decision="approve")
        )
    return len(pending)


def history_is_one_chain(thread_id: str) -> bool:
    """Every checkpoint but the first has a parent, and no checkpoint has two children: no step
    of the thread ran (and committed) twice."""
    from checkpoints.models import Checkpoint

    parents: list[Any] = list(
        Checkpoint.objects.filter(thread_id=thread_id).values_list("parent_id", flat=True)
    )
    return parents.count(None) == 1 and len(set(parents)) == len(parents)


class PrivateRedis:
    """A redis-server of our own on a free port, to stop and start again (no persistence: it
    restarts empty). The shared Redis is never stopped: other tests use it."""

    def __init__(self, name: str = "private-redis") -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.name = name
        self.process: Any = None

    def start(self) -> None:
        with (log_dir() / f"{self.name}.log").open("ab") as output:
            self.process = embedded_redis.start(self.port, output=output)

    def stop(self) -> None:
        if self.process is not None:
            embedded_redis.stop(self.process)
            self.process = None

    def queued(self, queue: str) -> int:
        """How many messages wait in a broker queue (a Redis list) of it."""
        import redis

        with redis.Redis(port=self.port) as client:
            return int(client.llen(queue))
