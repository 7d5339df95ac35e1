"""Retention: each agent's TTL and keep-last-N, applied by `manage.py prune_checkpoints` and a
Celery beat task (checkpoints.tasks.prune_checkpoints_task).

The checkpoint store knows nothing of agents: settings.CHECKPOINT_RETENTION_SOURCE names a
function from an agent's name to its policy (agents.graph.retention_for). Pruning never
deletes a thread's head, nor any checkpoint a protect_checkpoints receiver names.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone
from django.utils.module_loading import import_string

from checkpoints.backends import get_backend
from checkpoints.backends.base import BaseCheckpointBackend, PruneResult
from checkpoints.langgraph.pruning import langgraph_agents, prune_agent
from checkpoints.signals import protect_checkpoints


class Policy(Protocol):
    @property
    def ttl_days(self) -> int | None: ...

    @property
    def keep_last(self) -> int | None: ...


@dataclass(frozen=True)
class Override:
    """A policy given by hand (the prune command's options), in place of the agents' own."""

    ttl_days: int | None = None
    keep_last: int | None = None


@dataclass(frozen=True)
class Limits:
    """A policy as pruning applies it."""

    keep_last: int | None = None
    older_than: datetime | None = None

    @classmethod
    def of(cls, policy: Policy | None, *, now: datetime) -> "Limits":
        if policy is None:
            return cls()
        ttl = policy.ttl_days
        return cls(
            keep_last=policy.keep_last, older_than=now - timedelta(days=ttl) if ttl is not None else None
        )

    @property
    def prunes(self) -> bool:
        return self.keep_last is not None or self.older_than is not None


@dataclass(frozen=True)
class Report:
    threads: int = 0
    checkpoints: int = 0
    values: int = 0
    store_items: int = 0


def policy_for(agent: str) -> Policy | None:
    """The retention policy of an agent, from settings.CHECKPOINT_RETENTION_SOURCE (None: keep all)."""
    path = getattr(settings, "CHECKPOINT_RETENTION_SOURCE", "")
    return import_string(path)(agent) if path else None


def protected(thread_id: str) -> set[str]:
    """Checkpoints of the thread that receivers of protect_checkpoints ask to keep."""
    kept: set[str] = set()
    for _, ids in protect_checkpoints.send(sender=BaseCheckpointBackend, thread_id=thread_id):
        kept.update(str(i) for i in ids or ())
    return kept


def prune_thread(
    thread_id: str, *, limits: Limits, backend: BaseCheckpointBackend | None = None
) -> PruneResult:
    """Apply limits to one thread."""
    if not limits.prunes:
        return PruneResult()
    return (backend or get_backend()).prune(
        thread_id=thread_id,
        keep_last=limits.keep_last,
        older_than=limits.older_than,
        protected=protected(thread_id),
    )


def prune_all(
    *, now: datetime | None = None, agent: str | None = None, override: Policy | None = None
) -> Report:
    """Prune every thread whose agent has a policy (or `override`), then expired store items."""
    backend, now = get_backend(), now or timezone.now()
    threads = checkpoints = values = 0
    for name in [agent] if agent else backend.agents():
        limits = Limits.of(override or policy_for(name), now=now)
        if not limits.prunes:
            continue
        for thread_id in backend.prune_candidates(
            agent=name, keep_last=limits.keep_last, older_than=limits.older_than
        ):
            result = prune_thread(thread_id, limits=limits, backend=backend)
            threads += bool(result.checkpoints)
            checkpoints += result.checkpoints
            values += result.values
    for name in [agent] if agent else langgraph_agents():
        limits = Limits.of(override or policy_for(name), now=now)
        if limits.prunes:
            pruned, freed = prune_agent(
                using=DEFAULT_DB_ALIAS, agent=name, keep_last=limits.keep_last, older_than=limits.older_than
            )
            checkpoints, values = checkpoints + pruned, values + freed
    return Report(threads, checkpoints, values, backend.store_purge_expired())
