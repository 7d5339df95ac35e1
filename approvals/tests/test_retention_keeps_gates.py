"""Retention never prunes the checkpoint a pending request points at (approvals connects
checkpoints.signals.protect_checkpoints in its AppConfig)."""

import pytest
from django.db import transaction

from approvals.models import ApprovalRequest, ApprovalStatus
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import CheckpointSource, ThreadStatus
from checkpoints.retention import Limits, prune_thread
from tests.factories import make_gate

pytestmark = pytest.mark.django_db


def test_pruning_keeps_the_checkpoint_a_pending_request_points_at() -> None:
    request_ = make_gate()
    backend = get_backend()
    head = backend.get(thread_id=request_.thread_id)
    with transaction.atomic():  # a later checkpoint that leaves the request pending
        later = backend.put(
            thread_id=request_.thread_id,
            parent_id=head.id,
            expected_head=head.id,
            status=ThreadStatus.WAITING,
            checkpoint=NewCheckpoint(values=head.values, source=CheckpointSource.UPDATE, next=head.next),
        )

    result = prune_thread(request_.thread_id, limits=Limits(keep_last=1))

    kept = [c.id for c in backend.history(thread_id=request_.thread_id)]
    assert result.checkpoints == 1  # the input checkpoint went
    assert kept == [later.id, head.id]
    assert ApprovalRequest.objects.get(pk=request_.pk).status == ApprovalStatus.PENDING


def test_pruning_a_decided_requests_checkpoint_removes_the_request_with_it() -> None:
    # docs/storage.md: approval requests of pruned checkpoints go with them (the foreign key
    # cascades); the ledger keeps the record of the decision.
    request_ = make_gate()
    ApprovalRequest.objects.filter(pk=request_.pk).update(status=ApprovalStatus.APPROVED)
    backend = get_backend()
    head = backend.get(thread_id=request_.thread_id)
    with transaction.atomic():
        later = backend.put(
            thread_id=request_.thread_id,
            parent_id=head.id,
            expected_head=head.id,
            status=ThreadStatus.RUNNING,
            checkpoint=NewCheckpoint(values=head.values, source=CheckpointSource.STEP),
        )

    prune_thread(request_.thread_id, limits=Limits(keep_last=1))

    assert [c.id for c in backend.history(thread_id=request_.thread_id)] == [later.id]
    assert not ApprovalRequest.objects.filter(pk=request_.pk).exists()
