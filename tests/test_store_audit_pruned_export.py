"""A thread whose retention pruned the checkpoint its branches shared still exports a document
that imports (and replays).

Pruning re-links a kept checkpoint whose ancestors all went to no parent: once the checkpoint a
fork branched from is pruned, the old branch and the new one each start a tree of their own.
The export listed both, and its own import (and replay_thread) refused the document: "a second
root: a thread has one first checkpoint". A whole-thread export now holds the tree the head is
in; an old branch retention cut off exports on its own (`?branch=`).
"""

import json
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from approvals.actions.threads import do_fork_thread
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest
from approvals.transfer_format import parse_document
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint, Thread
from checkpoints.retention import Limits, prune_thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def olga() -> Any:
    return make_user("olga", "operator")


def forked_then_pruned(olga: Any) -> ApprovalRequest:
    """A thread forked from its first checkpoint (with an edit), then pruned to its newest two:
    the gate of the old branch and the fork, each now without a parent."""
    gate = make_gate()
    root = Checkpoint.objects.get(thread_id=gate.thread_id, step=0)
    values = get_backend().get(thread_id=gate.thread_id, checkpoint_id=str(root.pk)).values
    values["messages"][0]["content"] = "Please refund order ORD-1003"
    do_fork_thread(gate.thread_id, user=olga, checkpoint_id=str(root.pk), values=values)
    assert prune_thread(gate.thread_id, limits=Limits(keep_last=2)).checkpoints == 1
    assert Checkpoint.objects.filter(thread_id=gate.thread_id, parent=None).count() == 2
    return gate


def test_a_thread_whose_fork_point_was_pruned_exports_a_document_that_imports(olga: Any) -> None:
    gate = forked_then_pruned(olga)
    head = str(Thread.objects.get(pk=gate.thread_id).head_id)
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=olga)}"})

    document = api.get(f"/api/threads/{gate.thread_id}/export").json()
    response = api.post("/api/imports?thread_id=pruned-copy", document, content_type="application/json")

    assert response.status_code == 201, response.content
    assert [c["id"] for c in document["checkpoints"]] == [head]
    assert Thread.objects.get(pk="pruned-copy").head is not None
    parse_document(document)  # what replay_thread checks first


def test_the_old_branch_retention_cut_off_exports_on_its_own(olga: Any, tmp_path: Any) -> None:
    gate = forked_then_pruned(olga)
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=olga)}"})

    document = api.get(f"/api/threads/{gate.thread_id}/export", {"branch": str(gate.checkpoint_id)}).json()

    assert [c["id"] for c in document["checkpoints"]] == [str(gate.checkpoint_id)]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(document))
    call_command("import_thread", str(path), "--as", "old-branch-copy")
    assert Thread.objects.get(pk="old-branch-copy").status == "waiting"
