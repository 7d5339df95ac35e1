"""Move each checkpoint's whole-state JSON into the linear layout (StoredValue rows + refs).

A checkpoint whose old digest no longer matched its values gets an impossible digest, so it
still refuses to load instead of being re-sealed as if it were sound.
"""

import hashlib

from django.db import migrations

from checkpoints.digest import canonical_json, checkpoint_digest
from checkpoints.storage.crypto import current_sealer
from checkpoints.storage.layout import Layout, plan_write

REFUSED = bytes(32)


def _old_digest(row, thread_id):
    body = {
        "thread": thread_id,
        "parent": str(row.parent_id) if row.parent_id else None,
        "step": row.step,
        "values": row.values,
        "next": row.next,
        "schema_version": row.schema_version,
    }
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def _convert_thread(thread_id, Checkpoint, StoredValue, sealer):
    layouts = {}
    for row in Checkpoint.objects.filter(thread_id=thread_id).order_by("step", "created_at"):
        parent = layouts.get(str(row.parent_id)) if row.parent_id else None
        plan = plan_write(row.values or {}, parent=parent, sealer=sealer)
        StoredValue.objects.bulk_create(
            [
                StoredValue(thread_id=thread_id, key=r.key, prev=r.prev, data=r.data, run=r.run, depth=r.depth)
                for r in plan.rows
            ],
            ignore_conflicts=True,
        )
        # 0002 turned the hex digest column into bytes of that hex text (SQLite keeps the text).
        old = row.digest if isinstance(row.digest, str) else bytes(row.digest).decode("ascii", "replace")
        sound = old == _old_digest(row, thread_id)
        row.refs = plan.fields_json
        row.digest = REFUSED if not sound else bytes.fromhex(checkpoint_digest(
            thread_id=thread_id, step=row.step, source=row.source, node=row.node, next=list(row.next),
            created_by=row.created_by, schema_version=row.schema_version, metadata=row.metadata,
            fields=plan.digest_fields,
        ))
        row.save(update_fields=["refs", "digest"])
        layouts[str(row.id)] = Layout(str(row.id), thread_id, row.step, plan.refs, plan.lists)


def forwards(apps, schema_editor):
    Thread = apps.get_model("checkpoints", "Thread")
    Checkpoint = apps.get_model("checkpoints", "Checkpoint")
    StoredValue = apps.get_model("checkpoints", "StoredValue")
    PendingWrite = apps.get_model("checkpoints", "PendingWrite")
    sealer = current_sealer()
    for thread_id in Thread.objects.values_list("id", flat=True).iterator():
        _convert_thread(thread_id, Checkpoint, StoredValue, sealer)
    for write in PendingWrite.objects.all().iterator():
        write.data = sealer.seal(canonical_json(write.value))
        write.save(update_fields=["data"])


class Migration(migrations.Migration):
    dependencies = [("checkpoints", "0002_linear_storage")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop, elidable=True)]
