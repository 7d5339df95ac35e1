"""Each tool's ordered policies, cached per process under the policies' generation: a random
value in one database row (PolicyGeneration), written in the transaction of every policy change
and read at every gate, inside the step's transaction, by one prepared primary-key query. No
Redis: the database that holds the policies says which are current.

The generation is read before the rules, so a cache is never tagged newer than its rows: a
change committed in between leaves it tagged older, and the next gate reads the rules again.
A change and its new generation commit together or not at all, so no process can miss one.
Random, not a counter: a value rolled back or flushed away is never written again. The
transaction that changed a policy reads the new value (its own write) and the rules with its
change; nobody else reads that value unless it commits. Anything that changes policies without
Policy.save/delete (a queryset update, bulk_create) calls policies_changed() in its transaction;
a flush (post_migrate) writes a new row.
"""

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from django.apps.registry import Apps
from django.db import connection

from approvals.models import PolicyGeneration
from checkpoints.backends.orm import prepared

T = TypeVar("T")
GENERATIONS = PolicyGeneration._meta.db_table
_READ = f"SELECT value FROM {GENERATIONS} WHERE id = 1"
# An upsert: a flushed table gets its row back with the change.
_WRITE = (
    f"INSERT INTO {GENERATIONS} (id, value) VALUES (1, %s)"
    " ON CONFLICT (id) DO UPDATE SET value = excluded.value"
)

_cached: dict[str, tuple[str, Any]] = {}  # tool -> (generation, its rules)


def current_generation() -> str | None:
    """The policies' generation as this transaction sees it; None without its row (a flushed
    table before post_migrate wrote it again: then nothing is cached)."""
    row = prepared.fetch_one(_READ, [])
    return None if row is None else str(row[0])


def policies_changed() -> None:
    """Call in the transaction that changed policies, after the change: a new generation that
    commits (or rolls back) with it. Writers queue on the row's lock until each commits; every
    policy action takes it after the policy's row and before the ledger's head, so no deadlock."""
    with connection.cursor() as cursor:
        cursor.execute(_WRITE, [uuid.uuid4().hex])


def cached(tool: str, *, load: Callable[[str], T]) -> T:
    """`load(tool)`, from this process's cache while the generation holds."""
    generation = current_generation()  # before the rules: a change in between tags them older
    if generation is None:
        return load(tool)
    hit = _cached.get(tool)
    if hit is not None and hit[0] == generation:
        return hit[1]
    rules = load(tool)
    _cached[tool] = (generation, rules)
    return rules


def on_policy_saved(sender: Any, **kwargs: Any) -> None:
    policies_changed()


def on_flush(sender: Any, *, apps: Apps | None = None, **kwargs: Any) -> None:
    """After a flush (which empties the table) or a migration, once: write the row anew."""
    if getattr(sender, "label", None) != "approvals":
        return
    if apps is not None:  # a migration: skip it if it left the database before the table
        try:
            apps.get_model("approvals", "PolicyGeneration")
        except LookupError:
            return
    policies_changed()
