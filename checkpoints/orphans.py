"""Running threads that nobody runs: what the reconciler (agents.tasks) finds and takes back.

The lease columns are the store's business; the reconciler asks only "which threads are
orphaned?" and "is this one still orphaned? then it is mine to re-send". Both answers are by
the database's clock, the one leases and updated_at are written by: the reconciler's host may
run ahead of the workers' (a live lease would look lapsed) or behind (a dead one, alive)."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.db.models import Q

from checkpoints.backends.orm.statements import now
from checkpoints.models import Thread, ThreadStatus


@dataclass(frozen=True)
class Orphan:
    thread_id: str
    head_id: UUID
    lease_owner: str
    updated_at: datetime


def find_orphans(*, handoff_grace_s: float, queued_after_s: float, limit: int = 500) -> list[Orphan]:
    """Running threads whose lease lapsed with its owner's name still on it (the owner died
    mid-step, or before sending the next step: older than handoff_grace_s), or that have had no
    lease for queued_after_s (handed to the broker, which lost the task)."""
    lapsed = ~Q(lease_owner="") & Q(lease_expires_at__lt=now() - timedelta(seconds=handoff_grace_s))
    forgotten = Q(lease_owner="", updated_at__lt=now() - timedelta(seconds=queued_after_s))
    rows = (
        Thread.objects.filter(status=ThreadStatus.RUNNING, head__isnull=False)
        .filter(lapsed | forgotten)
        .values_list("id", "head_id", "lease_owner", "updated_at")[:limit]
    )
    return [Orphan(thread_id=t, head_id=h, lease_owner=o, updated_at=u) for t, h, o, u in rows]


def take_orphan(orphan: Orphan) -> bool:
    """Clear the orphan's lease and mark it queued afresh (so the next pass does not echo this
    one), only if nobody claimed it meanwhile: the row is as it was read. True if taken."""
    unchanged = Thread.objects.filter(
        pk=orphan.thread_id,
        head_id=orphan.head_id,
        status=ThreadStatus.RUNNING,
        lease_owner=orphan.lease_owner,
        updated_at=orphan.updated_at,
    ).filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now()))
    return bool(unchanged.update(lease_owner="", lease_expires_at=None, updated_at=now()))
