"""Each tool's ordered policies, cached per process, checked at every gate against a version
in Redis that every policy change bumps (one Redis GET instead of a database query).

A change bumps the version when its transaction commits, so other processes never cache rows
that are not committed. Until then, the transaction that made the change reads the database
(it must see its own change; nothing it reads is cached). Anything that changes policies
without Policy.save/delete (a queryset update, bulk_create, a flush) calls policies_changed()
or bump_version(); a flush (post_migrate) bumps by itself. Without Redis, every gate reads the
database, as before. A bump that cannot reach Redis is retried in the background until it does.
"""

import logging
import threading
import uuid
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from django.conf import settings
from django.db import connection, transaction

log = logging.getLogger(__name__)

VERSION_KEY = "gatehouse:policies:version"
T = TypeVar("T")

_cached: dict[str, tuple[str, Any]] = {}  # tool -> (version, its rules)
_local = threading.local()  # .block: the outermost atomic block that changed policies
_client: redis.Redis | None = None
_lock = threading.Lock()
_retrier: threading.Thread | None = None  # announcing lost bumps
_unannounced = False  # a bump was lost since the retrier last tried
_retrier_lock = threading.Lock()
_wake = threading.Event()  # a bump was lost while the retrier waited
RETRY_FIRST_S, RETRY_MAX_S = 0.5, 30.0


def _redis() -> redis.Redis:
    global _client
    with _lock:
        if _client is None:
            _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=0.2, socket_connect_timeout=0.2)
        return _client


def current_version() -> str | None:
    """The policies' version, or None when Redis cannot say (then nothing is cached)."""
    try:
        client = _redis()
        value = client.get(VERSION_KEY)
        if value is None:  # a flushed or new Redis: start a version nobody has cached
            client.set(VERSION_KEY, uuid.uuid4().hex, nx=True)
            value = client.get(VERSION_KEY)
    except redis.RedisError as exc:
        log.debug("policies read from the database: Redis: %s", exc)
        return None
    return value.decode() if isinstance(value, bytes) else None


def bump_version() -> None:
    """Make every process read the policies again at its next gate."""
    _cached.clear()
    if not _announce():
        _retry_in_background()


def _announce() -> bool:
    try:
        _redis().set(VERSION_KEY, uuid.uuid4().hex)
    except redis.RedisError as exc:
        log.warning("policy change not announced (Redis: %s); retrying in the background", exc)
        return False
    return True


def _retry_in_background() -> None:
    """Announce the change once Redis answers again: a Redis back with its old version (restarted
    from a snapshot) would leave every process trusting rules it cached before the change. The
    gate still checks the policy it matched (policy_gates), but not the ones it did not."""
    global _retrier, _unannounced
    with _retrier_lock:
        _unannounced = True
        if _retrier is None or not _retrier.is_alive():  # (a forked child has none running)
            _retrier = threading.Thread(target=_retry, name="policy-version-bump", daemon=True)
            _retrier.start()
        else:
            _wake.set()  # try soon again, not at the end of a long back-off


def _retry() -> None:
    """Set a new version until one is set after every lost bump (one announces them all)."""
    global _retrier, _unannounced
    delay = RETRY_FIRST_S
    while True:
        if _wake.wait(delay):
            _wake.clear()
            delay = RETRY_FIRST_S
        with _retrier_lock:
            _unannounced = False
        try:
            _redis().set(VERSION_KEY, uuid.uuid4().hex)
        except redis.RedisError:
            delay = min(delay * 2, RETRY_MAX_S)
            with _retrier_lock:
                _unannounced = True
            continue
        with _retrier_lock:
            if not _unannounced:  # no bump was lost while this one was on its way
                _retrier = None
                log.info("policy change announced after Redis came back")
                return


def _changing_here() -> bool:
    """Whether the current transaction changed policies (it must read its own changes)."""
    block = getattr(_local, "block", None)
    blocks = connection.atomic_blocks
    return bool(blocks) and block is not None and block() is blocks[0]


def policies_changed() -> None:
    """Call when policies changed: bump the version at commit; read them fresh until then."""
    if connection.in_atomic_block and connection.atomic_blocks:
        _local.block = weakref.ref(connection.atomic_blocks[0])
    transaction.on_commit(bump_version)


def cached(tool: str, *, load: Callable[[str], T]) -> T:
    """`load(tool)`, from this process's cache while the version holds."""
    if _changing_here():
        return load(tool)
    version = current_version()
    if version is None:
        return load(tool)
    hit = _cached.get(tool)
    if hit is not None and hit[0] == version:
        return hit[1]
    rules = load(tool)
    _cached[tool] = (version, rules)
    return rules


def on_policy_saved(sender: Any, **kwargs: Any) -> None:
    policies_changed()


def on_flush(sender: Any, **kwargs: Any) -> None:
    bump_version()
