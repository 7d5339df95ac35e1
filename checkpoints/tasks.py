"""Celery tasks of the checkpoint store: thin, they call the service."""

from dataclasses import asdict

from celery import shared_task

from checkpoints import retention


@shared_task
def prune_checkpoints_task() -> dict[str, int]:
    """Apply every agent's retention policy and drop expired store items (Celery beat)."""
    return asdict(retention.prune_all())
