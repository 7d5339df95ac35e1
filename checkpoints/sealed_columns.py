"""Every model column declared as an EncryptedJSONField (any app's): read raw, re-encrypt.

Found through the app registry, so `rotate_checkpoint_key` covers the approvals' arguments,
reasons and the audit ledger without this app knowing of them.
"""

from typing import Any

from django.apps import apps
from django.db import models
from django.db.models.functions import Cast
from django.db.models.lookups import Exact

from checkpoints.fields import EncryptedJSONField
from checkpoints.keyset import batches
from checkpoints.storage.crypto import current_sealer


def encrypted_columns() -> list[tuple[type[models.Model], str]]:
    return [
        (model, field.name)
        for model in apps.get_models()
        for field in model._meta.concrete_fields
        if isinstance(field, EncryptedJSONField)
    ]


def stored_text(name: str) -> Cast:
    """The column's stored text (canonical JSON or a Fernet token), not decrypted."""
    return Cast(name, output_field=models.TextField())


def reseal_columns(*, batch_size: int = 500) -> int:
    """Re-encrypt every encrypted column's values with the first key; return the values rewritten."""
    return sum(_reseal(model, name, batch_size) for model, name in encrypted_columns())


def _reseal(model: type[models.Model], name: str, batch_size: int) -> int:
    sealer, rewritten = current_sealer(), 0
    rows = model._default_manager.exclude(**{f"{name}__isnull": True})
    for batch in batches(rows, stored_text(name), batch_size=batch_size):
        for pk, stored in batch:
            sealed = sealer.reseal(stored)
            if sealed != stored and _rewrite(model, name, pk=pk, stored=stored, sealed=sealed):
                rewritten += 1
    return rewritten


def _rewrite(model: type[models.Model], name: str, *, pk: Any, stored: str, sealed: str) -> bool:
    """Write the resealed text if the column still holds what was read: a value written meanwhile
    (sealed with the first key already) is not overwritten with the older one."""
    unchanged: Exact[str] = Exact(stored_text(name), models.Value(stored, output_field=models.TextField()))
    value = models.Value(sealed, output_field=models.TextField())  # written as is
    return bool(model._default_manager.filter(unchanged, pk=pk).update(**{name: value}))
